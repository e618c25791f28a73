// The HTTP stream's retry policy, apart from its curl transfer (http_stream.cc): which
// failures of an attempt are worth another try, which end the read with an error the
// user can act on, and how long to wait before the next try (exponential backoff with
// jitter; the count restarts whenever an attempt delivered new bytes). Private to the io
// layer. Thread-safety: a Backoff belongs to one transfer thread; the rest is pure.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>

namespace dataecho::http {

// What an attempt ended with, as the transfer saw it.
struct AttemptResult {
  CURLcode code = CURLE_OK;
  long status = 0;         // HTTP status of the final response (0: none)
  std::string error_text;  // libcurl's own message for a failure
};

// Why a failed attempt is worth another try (the text of the error if the tries run
// out); throws dataecho::Error for one that is not (a 404, a TLS failure, a refused
// redirect, ...). Not for CURLE_OK, nor for a 416 (the end of the data).
std::string retry_reason(const AttemptResult& a, const std::string& url);

// Why a TLS handshake failed, in words a user can act on.
std::string tls_failure(CURLcode code, const std::string& detail);

class Backoff {
 public:
  Backoff(int max_retries, double initial_s, double max_s)
      : max_retries_(max_retries), initial_s_(initial_s), max_s_(max_s) {}
  // After a failed attempt that delivered `delivered` new bytes, with `error` (from
  // retry_reason): the seconds to wait before the next try. Throws dataecho::Error (kIo)
  // once more than max_retries tries in a row delivered nothing new.
  double after_failure(uint64_t delivered, const std::string& error, const std::string& url);

 private:
  const int max_retries_;
  const double initial_s_, max_s_;
  int failures_ = 0;  // consecutive failed attempts that delivered nothing new
};

}  // namespace dataecho::http
