// http_common.h's shared request options, and http_head (http_stream.h).
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "dataecho/core/error.h"
#include "dataecho/io/http_stream.h"
#include "http_common.h"
#include "http_connections.h"
#include "s3_stream.h"

namespace dataecho {
namespace http {

std::string env_ca_file() {
  for (const char* var : {"SSL_CERT_FILE", "CURL_CA_BUNDLE"})
    if (const char* v = std::getenv(var); v && *v) return v;
  return "";
}

void configure_common(CURL* easy, const std::string& url, const StreamOptions& options,
                      curl_slist* headers, char* errbuf, const s3::Config* s3) {
  curl_easy_reset(easy);
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
  // From https, redirects may lead only to https: never credentials in the clear.
  if (url.size() > 8 && strncasecmp(url.c_str(), "https://", 8) == 0)
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "https");
  const std::string ca_file = options.ca_file.empty() ? env_ca_file() : options.ca_file;
  if (!ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, ca_file.c_str());
  if (!options.ca_path.empty()) curl_easy_setopt(easy, CURLOPT_CAPATH, options.ca_path.c_str());
  if (options.insecure) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (headers) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "dataecho/0.1");
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout_s * 1000));
  if (options.low_speed_time_s > 0) {
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(options.low_speed_time_s)));
  }
  if (s3) s3::configure_request(easy, *s3);  // after FOLLOWLOCATION and FAILONERROR: overrides them
}
namespace {
size_t on_head_header(char* p, size_t size, size_t n, void* out) {
  auto* h = static_cast<HttpHead*>(out);
  const std::string line(p, size * n);
  auto value = [&](size_t at) {
    std::string v = line.substr(at);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(0, 1);
    return v;
  };
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect)
    *h = HttpHead{};
  } else if (strncasecmp(line.c_str(), "etag:", 5) == 0) {
    h->etag = value(5);
  } else if (strncasecmp(line.c_str(), "content-length:", 15) == 0) {
    h->content_length = std::atoll(value(15).c_str());
  }
  return size * n;
}
}  // namespace

}  // namespace http

HttpHead http_head(const std::string& url, const StreamOptions& options) {
  return http::head_target({url, url, nullptr}, options);
}

HttpHead http::head_target(const Target& t, const StreamOptions& options) {
  ensure_curl_initialized();
  curl_slist* headers = nullptr;
  for (const auto& h : options.headers) headers = curl_slist_append(headers, h.c_str());
  if (t.s3)
    for (const auto& h : s3::request_headers(*t.s3))
      headers = curl_slist_append(headers, h.c_str());
  CURL* easy = curl_easy_init();
  char errbuf[CURL_ERROR_SIZE] = {0};
  HttpHead head;
  double delay = options.backoff_initial_s;
  CURLcode rc = CURLE_OK;
  for (int attempt = 0; attempt <= options.max_retries; ++attempt) {
    configure_common(easy, t.url, options, headers, errbuf, t.s3.get());
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &on_head_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &head);
    rc = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    // 4xx: not retried. S3's 5xx come back as CURLE_OK (no FAILONERROR): retried.
    if ((rc == CURLE_OK && !(t.s3 && status >= 500)) || (status >= 400 && status < 500)) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay = std::min(options.backoff_max_s, delay * 2);
  }
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &head.status);
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK)
    throw Error(ErrorCode::kIo, t.s3 ? s3::kStage : kStage,
                std::string("HEAD failed: ") + (errbuf[0] ? errbuf : curl_easy_strerror(rc)),
                t.display);
  return head;
}

}  // namespace dataecho
