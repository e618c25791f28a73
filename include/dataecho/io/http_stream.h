// HTTP(S) byte streams over libcurl: keep-alive connections, retries with backoff and
// jitter, and resume with `Range: bytes=N-` so that no byte is delivered twice or lost.
#pragma once

#include <memory>
#include <string>

#include "dataecho/io/byte_stream.h"

namespace dataecho {

std::unique_ptr<ByteStream> open_http_stream(const std::string& url, const StreamOptions& options);

// What a HEAD request says of a URL (with the stream options' TLS settings, headers,
// timeouts and retries): the status, the size (-1: not given) and the ETag ("": none).
struct HttpHead {
  long status = 0;
  int64_t content_length = -1;
  std::string etag;
};
// Throws dataecho::Error (kIo, stage "http") when no answer came after the retries.
HttpHead http_head(const std::string& url, const StreamOptions& options);

}  // namespace dataecho
