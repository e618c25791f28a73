#include "http_retry.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "dataecho/core/error.h"
#include "http_common.h"

namespace dataecho::http {
namespace {

bool is_transient(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_AGAIN:
      return true;
    default:
      return false;
  }
}

bool is_transient_status(long status) { return status >= 500 || status == 408 || status == 429; }

}  // namespace

std::string tls_failure(CURLcode code, const std::string& detail) {
  std::string why;
  if (detail.find("expired") != std::string::npos)
    why = "the server's certificate has expired";
  else if (detail.find("subject name") != std::string::npos ||
           detail.find("does not match") != std::string::npos)
    why = "host name mismatch: the server's certificate is not for this host";
  else if (code == CURLE_PEER_FAILED_VERIFICATION)
    why =
        "untrusted certificate: its issuer is not a trusted CA (give the CA with "
        "http.ca_file or http.ca_path in the spec, or SSL_CERT_FILE / CURL_CA_BUNDLE)";
  else
    why = "TLS setup failed";
  return why + (detail.empty() ? "" : " [" + detail + "]") + " (not retried)";
}

std::string retry_reason(const AttemptResult& a, const std::string& url) {
  if (a.code == CURLE_HTTP_RETURNED_ERROR) {
    if (!is_transient_status(a.status)) {
      // A presigned URL (its authorization in the query string) answers 403 once its
      // signature has expired: say so, as a fresh manifest is the fix.
      const bool signed_url = url.find('?') != std::string::npos;
      throw Error(a.status == 404 || a.status == 410 ? ErrorCode::kNotFound : ErrorCode::kIo,
                  kStage,
                  "GET failed with HTTP " + std::to_string(a.status) + " (not retried)" +
                      (a.status == 403 && signed_url
                           ? "; the signature of this presigned URL may have expired: "
                             "sign the manifest again"
                           : ""),
                  url);
    }
    return "HTTP " + std::to_string(a.status);
  }
  if (a.code == CURLE_PEER_FAILED_VERIFICATION || a.code == CURLE_SSL_CACERT_BADFILE ||
      a.code == CURLE_SSL_CERTPROBLEM)
    throw Error(ErrorCode::kIo, kStage, "GET failed: " + tls_failure(a.code, a.error_text), url);
  if (a.code == CURLE_UNSUPPORTED_PROTOCOL && a.status >= 300 && a.status < 400)
    throw Error(ErrorCode::kIo, kStage,
                "GET failed: a redirect from https to another protocol is refused (not "
                "retried)",
                url);
  const std::string detail = a.error_text.empty() ? "" : " [" + a.error_text + "]";
  if (!is_transient(a.code))
    throw Error(ErrorCode::kIo, kStage,
                std::string("GET failed: ") + curl_easy_strerror(a.code) + detail, url);
  return curl_easy_strerror(a.code) + detail;
}

double Backoff::after_failure(uint64_t delivered, const std::string& error,
                              const std::string& url) {
  if (delivered > 0) failures_ = 0;
  ++failures_;
  if (failures_ > max_retries_)
    throw Error(ErrorCode::kIo, kStage,
                "GET failed after " + std::to_string(failures_) + " tries, last error: " + error,
                url);
  const double delay = std::min(max_s_, initial_s_ * std::pow(2.0, failures_ - 1));
  // Seeded on a thread's first failure, not per stream: a random_device costs more than
  // a small object's whole transfer.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return delay * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
}

}  // namespace dataecho::http
