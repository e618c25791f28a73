// The fuzz targets read from memory: open_stream's HTTP branch is never taken.
#include "dataecho/core/error.h"
#include "dataecho/io/http_stream.h"

namespace dataecho {
std::unique_ptr<ByteStream> open_http_stream(const std::string& url, const StreamOptions&) {
  throw Error(ErrorCode::kInvalidArgument, "http", "not in fuzz builds", url);
}
}  // namespace dataecho
