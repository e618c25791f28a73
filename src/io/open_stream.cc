// open_stream: one entry point for every file-based source; dispatches on the URI
// scheme (http:// and https:// to the libcurl stream, everything else to a local file).
#include <algorithm>
#include <cctype>

#include "dataecho/io/byte_stream.h"
#include "dataecho/io/http_stream.h"
#include "dataecho/io/shard_cache.h"

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
}  // namespace

bool is_http_uri(const std::string& uri) {
  return starts_with_nocase(uri, "http://") || starts_with_nocase(uri, "https://");
}

std::unique_ptr<ByteStream> open_stream(const std::string& uri, const StreamOptions& options) {
  if (is_http_uri(uri) && !options.cache_dir.empty()) return open_cached_http_stream(uri, options);
  if (is_http_uri(uri)) return open_http_stream(uri, options);
  return open_local_stream(uri, options);
}

size_t ByteStream::read_fully(void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    size_t got = read(p + done, n - done);
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace dataecho
