// Placeholder until the HTTP reader lands; its owner replaces this file.
#include "dataecho/io/http_stream.h"

#include "dataecho/core/error.h"

namespace dataecho {

std::unique_ptr<ByteStream> open_http_stream(const std::string& url, const StreamOptions&) {
  throw Error(ErrorCode::kInvalidArgument, "http", "HTTP sources are not built yet", url);
}

}  // namespace dataecho
