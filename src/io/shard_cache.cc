#include "dataecho/io/shard_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/core/file_io.h"
#include "dataecho/core/hash.h"
#include "dataecho/io/http_stream.h"
#include "io/s3_stream.h"
#include "io/sha256.h"

namespace dataecho {

std::unique_ptr<ByteStream> open_local_stream(const std::string& uri, const StreamOptions& options);

namespace {

namespace fs = std::filesystem;
constexpr const char* kStage = "cache_dir";

[[noreturn]] void fail(ErrorCode code, const std::string& message, const std::string& uri) {
  throw Error(code, kStage, message, uri);
}

std::string url_hash(const std::string& url) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(url)));
  return hex;
}

void count(const StreamOptions& o, const char* counter, int64_t n = 1) {
  if (o.stats) o.stats->counter(counter) += n;
}

// A lock file held with flock (released when the descriptor closes): a shard's .lock is
// held exclusively while it is checked or fetched, its .use shared while it is read.
class ShardLock {
 public:
  ShardLock(const std::string& path, int operation)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0)
      fail(ErrorCode::kIo, path + ": cannot open the lock file: " + std::strerror(errno), path);
    if (!take(operation)) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~ShardLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;
  bool held() const { return fd_ >= 0; }
  bool take(int operation) {
    int rc;
    while ((rc = ::flock(fd_, operation)) != 0 && errno == EINTR) {
    }
    return rc == 0;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

struct Meta {
  std::string url;
  int64_t size = -1;
  std::string etag;
};

Meta read_meta(const std::string& path) {
  Meta m;
  std::ifstream f(path);
  std::string size;
  if (!std::getline(f, m.url) || !std::getline(f, size)) return {};
  std::getline(f, m.etag);
  m.size = std::atoll(size.c_str());
  return m;
}

int64_t file_size_or(const std::string& path, int64_t fallback) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? fallback : static_cast<int64_t>(n);
}

StreamOptions without_cache(const StreamOptions& o) {
  StreamOptions plain = o;
  plain.cache_dir.clear();
  return plain;
}

// The checksum a URI gives (#sha256=), if any: an s3:// key may hold other '#'s.
std::optional<std::string> uri_sha256(const std::string& uri) {
  if (!is_s3_uri(uri)) return url_sha256(uri);
  std::string hex = s3::parse_uri(uri).sha256;
  return hex.empty() ? std::nullopt : std::optional<std::string>(std::move(hex));
}

// The remote shard: a plain GET, or a signed one for s3://.
std::unique_ptr<ByteStream> open_remote(const std::string& uri, const StreamOptions& o) {
  return is_s3_uri(uri) ? s3::open_s3_stream(uri, o) : open_http_stream(uri, o);
}

// Downloads `url` whole into base.shard (through a temporary file) and writes base.meta.
// The copy is kept only when its length is the server's and, when the URL gives one
// (`#sha256=`), its SHA-256 is that one.
void fetch(const std::string& url, const StreamOptions& o, const std::string& base,
           const HttpHead& head) {
  auto in = open_remote(url, without_cache(o));
  const std::optional<std::string> want_sha256 = uri_sha256(url);
  Sha256 sha256;
  std::random_device rd;
  const std::string tmp =
      base + ".shard.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  int64_t total = 0;
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::vector<char> buf(1 << 20);
    while (size_t n = in->read(buf.data(), buf.size())) {
      out.write(buf.data(), static_cast<std::streamsize>(n));
      if (want_sha256) sha256.update(buf.data(), n);
      total += static_cast<int64_t>(n);
    }
    out.flush();
    if (!out) fail(ErrorCode::kIo, tmp + ": cannot write the downloaded shard", url);
    const int64_t expected = in->size() >= 0 ? in->size() : head.content_length;
    if (expected >= 0 && total != expected)
      fail(ErrorCode::kDataLoss,
           "downloaded " + std::to_string(total) + " bytes, the server said " +
               std::to_string(expected),
           url);
    if (want_sha256) {
      const std::string got = sha256.hex_digest();
      if (got != *want_sha256)
        fail(ErrorCode::kDataLoss,
             "the downloaded shard's sha256 is " + got + ", the URL's #sha256= says " +
                 *want_sha256 + " (not kept)",
             url);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  fs::rename(tmp, base + ".shard");
  write_file_atomically(base + ".meta",
                        url + "\n" + std::to_string(total) + "\n" + head.etag + "\n", kStage);
  count(o, "cache_misses");
  count(o, "cache_bytes_fetched", total);
}

// Whether the local copy is whole and, as far as the server says, current.
bool is_current(const std::string& url, const std::string& base, const HttpHead* head) {
  const Meta m = read_meta(base + ".meta");
  if (m.url != url || m.size < 0 || file_size_or(base + ".shard", -1) != m.size) return false;
  if (!head) return true;  // the server could not be asked: the whole copy is read
  if (head->content_length >= 0 && head->content_length != m.size) return false;
  return head->etag.empty() || head->etag == m.etag;
}

// Deletes the least recently used shards nobody reads until the folder is within bound.
void evict(const StreamOptions& o, const std::string& keep) {
  if (o.cache_max_bytes <= 0) return;
  struct Entry {
    std::string base;
    int64_t size;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(o.cache_dir, ec)) {
    if (f.path().extension() != ".shard") continue;
    const std::string base = (f.path().parent_path() / f.path().stem()).string();
    const int64_t size = file_size_or(f.path().string(), 0);
    total += size;
    if (base != keep) entries.push_back({base, size, fs::last_write_time(f.path(), ec)});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= o.cache_max_bytes) break;
    ShardLock fetching(e.base + ".lock", LOCK_EX | LOCK_NB);
    ShardLock reading(e.base + ".use", LOCK_EX | LOCK_NB);
    if (!fetching.held() || !reading.held()) continue;  // being fetched or read
    std::remove((e.base + ".shard").c_str());
    std::remove((e.base + ".meta").c_str());
    total -= e.size;
    count(o, "cache_evictions");
  }
}

// When this process last found each cached shard current (by its folder path and URL
// hash), and the copy's length then: a later open within
// StreamOptions::cache_revalidate_s does not ask the server, and checks the copy by its
// length alone (one stat: another process may have evicted or replaced it since).
class RecentlyChecked {
 public:
  static RecentlyChecked& instance() {
    static RecentlyChecked r;
    return r;
  }
  bool within(const std::string& base, double seconds) {
    int64_t size = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = at_.find(base);
      if (it == at_.end() || std::chrono::steady_clock::now() - it->second.when >=
                                 std::chrono::duration<double>(seconds))
        return false;
      size = it->second.size;
    }
    return size >= 0 && file_size_or(base + ".shard", -1) == size;
  }
  void mark(const std::string& base) {
    const int64_t size = file_size_or(base + ".shard", -1);
    std::lock_guard<std::mutex> lock(mu_);
    at_[base] = {std::chrono::steady_clock::now(), size};
  }

 private:
  struct Checked {
    std::chrono::steady_clock::time_point when;
    int64_t size;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Checked> at_;
};

bool checked_recently(const std::string& base, const StreamOptions& o) {
  return o.cache_revalidate_s > 0 && RecentlyChecked::instance().within(base, o.cache_revalidate_s);
}

// The local copy, read while its lock is held shared; named by its URL.
class CachedStream : public ByteStream {
 public:
  CachedStream(std::unique_ptr<ByteStream> local, int lock_fd, std::string url)
      : local_(std::move(local)), lock_fd_(lock_fd), url_(std::move(url)) {}
  ~CachedStream() override { ::close(lock_fd_); }
  size_t read(void* dst, size_t n) override { return local_->read(dst, n); }
  uint64_t position() const override { return local_->position(); }
  void seek(uint64_t offset) override { local_->seek(offset); }
  int64_t size() const override { return local_->size(); }
  const std::string& uri() const override { return url_; }

 private:
  std::unique_ptr<ByteStream> local_;
  int lock_fd_;
  std::string url_;
};

// Opens the copy (its .lock held by the caller): marked most recently used, held shared
// while it is read, and the folder brought within its bound.
std::unique_ptr<ByteStream> open_copy(const std::string& url, const std::string& base,
                                      const StreamOptions& o) {
  ::utimensat(AT_FDCWD, (base + ".shard").c_str(), nullptr, 0);  // most recently used
  ShardLock use(base + ".use", LOCK_SH);
  auto local = open_local_stream(base + ".shard", o);
  evict(o, base);
  return std::make_unique<CachedStream>(std::move(local), use.release(), url);
}

}  // namespace

std::unique_ptr<ByteStream> open_cached_http_stream(const std::string& url,
                                                    const StreamOptions& o) {
  uri_sha256(url);  // a malformed #sha256= fragment fails before anything is fetched
  std::error_code ec;
  fs::create_directories(o.cache_dir, ec);
  if (ec)
    fail(ErrorCode::kIo, o.cache_dir + ": cannot create the cache folder: " + ec.message(), url);
  // An s3:// copy is keyed by its request URL (endpoint, bucket, key): two stores never
  // share one.
  const bool s3 = is_s3_uri(url);
  const std::string key = s3 ? s3::object_request_url(url, without_cache(o)) : url;
  const std::string base = (fs::path(o.cache_dir) / url_hash(key)).string();
  // One process checks and fetches a shard at a time (.lock); readers hold .use shared
  // for as long as they read, which only eviction waits for.
  ShardLock lock(base + ".lock", LOCK_EX);
  if (checked_recently(base, o)) {
    count(o, "cache_hits");
    return open_copy(url, base, o);
  }
  std::optional<HttpHead> head;
  try {
    head = s3 ? s3::head_object(url, without_cache(o)) : http_head(url, without_cache(o));
  } catch (const Error&) {
    if (!is_current(url, base, nullptr)) throw;  // no copy to fall back on
  }
  if (is_current(url, base, head ? &*head : nullptr)) {
    count(o, "cache_hits");
  } else {
    fetch(url, o, base, head ? *head : HttpHead{});
  }
  if (head) RecentlyChecked::instance().mark(base);
  return open_copy(url, base, o);
}

}  // namespace dataecho
