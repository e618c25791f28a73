// Record indexes of tfrecord and tar files, and their cache (see record_index.h).
#include "record_index.h"

#include <sys/stat.h>

#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "dataecho/core/redact.h"
#include "dataecho/formats/crc32c.h"
#include "dataecho/formats/tar.h"
#include "dataecho/formats/tfrecord.h"

namespace dataecho {
namespace {

// The walk reads on through data up to this size rather than seek past it (a local
// file's seek drops its read-ahead; an http(s) seek is a new request).
constexpr uint64_t kReadThroughBytes = 64 << 10;
constexpr uint64_t kTfRecordFraming = 16;  // length, its CRC, the data's CRC

uint64_t load_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string record_at(const std::string& uri, size_t record, uint64_t offset) {
  return uri + " record " + std::to_string(record) + " at byte " + std::to_string(offset);
}

// The whole of `uri`, or nullopt when there is no such file.
std::optional<std::string> read_if_present(const std::string& uri, const StreamOptions& so) {
  try {
    auto in = open_stream(uri, so);
    std::string out;
    char buf[64 << 10];
    while (size_t n = in->read(buf, sizeof buf)) out.append(buf, n);
    return out;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotFound) return std::nullopt;
    throw;
  }
}

// The size of `uri`; over http(s) the first response gives it. -1 when not known.
int64_t file_size(const std::string& uri, const StreamOptions& so) {
  auto in = open_stream(uri, so);
  if (in->size() < 0) {
    char c;
    in->read(&c, 1);
  }
  return in->size();
}

// One "offset size" line of a sidecar, or nullopt.
std::optional<std::pair<uint64_t, uint64_t>> parse_sidecar_line(std::string_view line) {
  auto skip_space = [&](size_t i) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    return i;
  };
  uint64_t v[2];
  size_t i = skip_space(0);
  for (uint64_t& x : v) {
    auto [p, ec] = std::from_chars(line.data() + i, line.data() + line.size(), x);
    if (ec != std::errc() ||
        (p != line.data() + line.size() && *p != ' ' && *p != '\t' && *p != '\r'))
      return std::nullopt;
    i = skip_space(static_cast<size_t>(p - line.data()));
  }
  if (i != line.size()) return std::nullopt;
  return std::make_pair(v[0], v[1]);
}

// The index a sidecar's text gives, checked line by line and against the file's size.
ShardIndex parse_sidecar(const std::string& label, const std::string& uri,
                         const std::string& sidecar, const std::string& text, int64_t size) {
  ShardIndex ix;
  ix.uri = uri;
  ix.bytes = size;
  uint64_t end = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = sidecar + " line " + std::to_string(line_no);
    const auto rec = parse_sidecar_line(line);
    if (!rec)
      throw_error(
          ErrorCode::kDataLoss, label,
          std::string("\"").append(line) + "\" is not \"offset size\" (two decimal numbers)",
          where);
    const size_t k = ix.offsets.size();
    if (rec->first != end)
      throw_error(ErrorCode::kDataLoss, label,
                  "record " + std::to_string(k) + " starts at byte " + std::to_string(rec->first) +
                      (k == 0 ? ", not at the file's start"
                              : ", where record " + std::to_string(k - 1) + " ends at byte " +
                                    std::to_string(end)),
                  where);
    if (rec->second < kTfRecordFraming)
      throw_error(ErrorCode::kDataLoss, label,
                  "record " + std::to_string(k) + " has " + std::to_string(rec->second) +
                      " bytes, fewer than a record's 16 bytes of framing",
                  where);
    ix.offsets.push_back(rec->first);
    end = rec->first + rec->second;
  }
  if (static_cast<int64_t>(end) != size)
    throw_error(ErrorCode::kDataLoss, label,
                "its records end at byte " + std::to_string(end) + " and " + uri + " has " +
                    std::to_string(size) +
                    " bytes: the file changed since the sidecar was written; write the sidecar "
                    "again or remove it",
                sidecar);
  ix.records = static_cast<int64_t>(ix.offsets.size());
  ix.offsets.push_back(end);
  return ix;
}

// Skips `n` bytes of `in`, seeking when that is cheaper than reading on; false if the
// data ends first.
bool skip_bytes(ByteStream& in, uint64_t n, bool seek) {
  if (seek && n > kReadThroughBytes) {
    in.seek(in.position() + n);
    return true;
  }
  char buf[16 << 10];
  while (n > 0) {
    const size_t got = in.read_fully(buf, static_cast<size_t>(std::min<uint64_t>(n, sizeof buf)));
    if (got == 0) return false;
    n -= got;
  }
  return true;
}

// The header walk over a tfrecord file.
ShardIndex walk_tfrecord(const std::string& label, const std::string& uri,
                         const StreamOptions& so) {
  StreamOptions o = so;
  o.buffer_bytes = kReadThroughBytes;
  auto in = open_stream(uri, o);
  ShardIndex ix;
  ix.uri = uri;
  ix.bytes = in->size();
  const bool seek = !is_remote_uri(uri) && ix.bytes >= 0;
  uint64_t at = 0;
  for (;;) {
    unsigned char h[12];
    const size_t got = in->read_fully(h, sizeof h);
    if (got == 0) break;
    const std::string where = record_at(uri, ix.offsets.size(), at);
    if (got < sizeof h)
      throw_error(ErrorCode::kDataLoss, label,
                  "truncated record header (" + std::to_string(got) + " of 12 bytes)", where);
    if (crc32c::mask(crc32c::value(h, 8)) != static_cast<uint32_t>(load_le(h + 8, 4)))
      throw_error(ErrorCode::kDataLoss, label,
                  TfRecordReader::status_reason(TfRecordReader::Status::kBadLengthCrc), where);
    const uint64_t length = load_le(h, 8);
    // The bytes after the header (all there are when the size is not known).
    uint64_t rest = UINT64_MAX;
    if (ix.bytes >= 0)
      rest = std::max<uint64_t>(static_cast<uint64_t>(ix.bytes), at + 12) - at - 12;
    if (length > rest || rest - length < 4 || !skip_bytes(*in, length + 4, seek))
      throw_error(ErrorCode::kDataLoss, label,
                  "truncated record: its " + std::to_string(length) +
                      " bytes of data and CRC run past the end of the file",
                  where);
    ix.offsets.push_back(at);
    at += 12 + length + 4;
  }
  ix.records = static_cast<int64_t>(ix.offsets.size());
  ix.offsets.push_back(at);
  if (ix.bytes < 0) ix.bytes = static_cast<int64_t>(at);
  return ix;
}

}  // namespace

std::string compressed_reason(const std::string& kind, const std::string& uri,
                              const std::string& filter) {
  return kind + " " + redact_urls(uri) + " is compressed (" + filter +
         "): it cannot be read from a record in its middle (" + filter +
         " has no index); decompress it or use file sharding";
}

ShardIndex tfrecord_record_index(const std::string& label, const std::string& uri,
                                 const StreamOptions& options) {
  const std::string sidecar = uri + kTfRecordSidecarSuffix;
  if (std::optional<std::string> text = read_if_present(sidecar, options)) {
    const int64_t size = file_size(uri, options);
    if (size >= 0) return parse_sidecar(label, uri, sidecar, *text, size);
  }
  return walk_tfrecord(label, uri, options);
}

ShardIndex tar_record_index(const std::string& label, const std::string& uri,
                            const StreamOptions& options) {
  auto stream = open_stream(uri, options);
  ShardIndex ix;
  ix.uri = uri;
  ix.bytes = stream->size();
  TarReader reader(std::move(stream));
  if (reader.compressed())
    throw_error(ErrorCode::kInvalidArgument, label,
                compressed_reason("tar shard", uri, reader.compression()));
  for (;;) {
    TarSample s;
    const TarReader::Status st = reader.next(&s);
    if (st == TarReader::Status::kEnd) break;
    if (st == TarReader::Status::kCorrupt)
      throw_error(ErrorCode::kDataLoss, label, reader.error(),
                  record_at(uri, ix.offsets.size(), reader.corrupt_offset()));
    ix.offsets.push_back(s.offset);  // a bad sample is a record too, as the source counts
  }
  ix.records = static_cast<int64_t>(ix.offsets.size());
  ix.offsets.push_back(static_cast<uint64_t>(reader.resume_offset()));
  return ix;
}

ShardIndex cached_record_index(const std::string& uri, const std::string& key,
                               const std::function<ShardIndex()>& make) {
  const std::string path = uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
  struct stat st;
  if (is_http_uri(uri) || ::stat(path.c_str(), &st) != 0) return make();
  // One entry per file and key: a file that changed replaces its entry.
  struct Entry {
    std::tuple<int64_t, int64_t, uint64_t> version;  // size, modification time (ns), inode
    std::shared_ptr<const ShardIndex> index;
  };
  const std::tuple<int64_t, int64_t, uint64_t> version{
      static_cast<int64_t>(st.st_size),
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
      static_cast<uint64_t>(st.st_ino)};
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, Entry> cache;
  {
    std::lock_guard lock(mu);
    auto it = cache.find({uri, key});
    if (it != cache.end() && it->second.version == version) return *it->second.index;
  }
  auto made = std::make_shared<const ShardIndex>(make());
  std::lock_guard lock(mu);
  cache[{uri, key}] = Entry{version, made};
  return *made;
}

}  // namespace dataecho
