// HTTP(S) byte streams over libcurl: keep-alive connections, retries with backoff and
// jitter, and resume with `Range: bytes=N-` so that no byte is delivered twice or lost.
#pragma once

#include <memory>
#include <string>

#include "dataecho/io/byte_stream.h"

namespace dataecho {

std::unique_ptr<ByteStream> open_http_stream(const std::string& url, const StreamOptions& options);

}  // namespace dataecho
