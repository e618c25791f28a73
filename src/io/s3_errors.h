// What an S3 answer of status >= 300 means (private to io): a retry (S3's 500
// InternalError, 503 SlowDown / ServiceUnavailable, 400 RequestTimeout, other 5xx, 408,
// 429) or a named error the user can act on (no such bucket or key, access denied, a
// wrong key id or secret, an expired token, a clock that is off, a bucket in another
// region, ...). Thread-safety: pure functions.
#pragma once

#include <string>

namespace dataecho::s3 {

// An answer as the transfer saw it.
struct Reply {
  long status = 0;
  std::string body;           // the XML error body (may be cut or empty: a HEAD has none)
  std::string region_header;  // x-amz-bucket-region, when sent
};

// Why a retry is worth it.
struct Retry {
  std::string reason;      // the error's text, should the tries run out
  bool slow_down = false;  // S3 asked to slow down (503 SlowDown)
};

// For a retryable answer, the Retry; otherwise throws dataecho::Error (stage "s3", input
// `display`, s3://bucket/key) saying what is wrong, with S3's code and message. `region`
// is the region the request was signed for. `action` names the request ("GET").
Retry classify_reply(const Reply& reply, const std::string& display, const std::string& region,
                     const std::string& action);

}  // namespace dataecho::s3
