// open_stream: one entry point for every file-based source; dispatches on the URI
// scheme (http://, https:// and s3:// to the libcurl stream, everything else to a local
// file).
#include <algorithm>
#include <cctype>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"
#include "dataecho/io/http_stream.h"
#include "dataecho/io/shard_cache.h"
#include "io/s3_stream.h"
#include "io/sha256.h"

namespace dataecho {

std::unique_ptr<ByteStream> open_local_stream(const std::string& uri, const StreamOptions& options);

namespace {
bool starts_with_nocase(const std::string& s, const char* prefix) {
  size_t n = std::char_traits<char>::length(prefix);
  if (s.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}
// An http(s) or s3 stream whose URI gives a `#sha256=`: the bytes are hashed as they are read
// and, at the end of the data, compared with it (a kDataLoss error when they differ).
// A stream that was sought (a restored position) cannot be checked and is not.
class Sha256CheckedStream : public ByteStream {
 public:
  Sha256CheckedStream(std::unique_ptr<ByteStream> in, std::string want)
      : in_(std::move(in)), want_(std::move(want)) {}
  size_t read(void* dst, size_t n) override {
    const size_t got = in_->read(dst, n);
    if (!checking_) return got;
    if (got > 0) sha256_.update(dst, got);
    // The end: an empty read, or the last byte of a known length (a reader that knows the
    // length, as the TFRecord reader does, may never ask past it).
    const bool end = (got == 0 && n > 0) ||
                     (in_->size() >= 0 && in_->position() == static_cast<uint64_t>(in_->size()));
    if (end) {
      checking_ = false;
      const std::string digest = sha256_.hex_digest();
      if (digest != want_)
        throw Error(ErrorCode::kDataLoss, "http",
                    "the data's sha256 is " + digest + ", the URL's #sha256= says " + want_,
                    in_->uri());
    }
    return got;
  }
  uint64_t position() const override { return in_->position(); }
  void seek(uint64_t offset) override {
    if (offset != in_->position()) checking_ = false;
    in_->seek(offset);
  }
  int64_t size() const override { return in_->size(); }
  const std::string& uri() const override { return in_->uri(); }

 private:
  std::unique_ptr<ByteStream> in_;
  std::string want_;
  Sha256 sha256_;
  bool checking_ = true;
};

// `stream`, checked against `sha256` at its end when that is not "".
std::unique_ptr<ByteStream> checked(std::unique_ptr<ByteStream> stream, std::string sha256) {
  if (sha256.empty()) return stream;
  return std::make_unique<Sha256CheckedStream>(std::move(stream), std::move(sha256));
}

}  // namespace

bool is_http_uri(const std::string& uri) {
  return starts_with_nocase(uri, "http://") || starts_with_nocase(uri, "https://");
}

std::unique_ptr<ByteStream> open_stream(const std::string& uri, const StreamOptions& options) {
  if (is_remote_uri(uri) && !options.cache_dir.empty())
    return open_cached_http_stream(uri, options);
  if (is_s3_uri(uri)) {
    const std::string sha256 = s3::parse_uri(uri).sha256;
    return checked(s3::open_s3_stream(uri, options), sha256);
  }
  if (is_http_uri(uri)) {
    std::optional<std::string> sha256 = url_sha256(uri);
    return checked(open_http_stream(uri, options), sha256.value_or(""));
  }
  return open_local_stream(uri, options);
}

size_t ByteStream::read_at_least(void* dst, size_t n, size_t at_least) {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < at_least && done < n) {
    size_t got = read(p + done, n - done);
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace dataecho
