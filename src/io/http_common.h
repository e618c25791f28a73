// What every libcurl request of the io layer sets from StreamOptions (private to io):
// the stream's GETs (http_stream.cc) and http_head (http_common.cc).
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>

#include "dataecho/io/byte_stream.h"
#include "dataecho/io/http_stream.h"

namespace dataecho::s3 {
struct Config;
}

namespace dataecho::http {

// The stage every HTTP error names.
inline constexpr const char* kStage = "http";

// SSL_CERT_FILE, else CURL_CA_BUNDLE (as the curl tool reads them), else "".
std::string env_ca_file();

// Resets `easy` and sets the options every request to `url` takes from StreamOptions:
// redirects, TLS, extra headers, timeouts (`errbuf` and `headers` must outlive the
// request). With `s3`, the request is an S3 one: signed with its credentials (unless
// anonymous), not redirected, and an error status's body is delivered (not failed on).
void configure_common(CURL* easy, const std::string& url, const StreamOptions& options,
                      curl_slist* headers, char* errbuf, const s3::Config* s3 = nullptr);

// What a stream reads: the URL requested and what its uri() and errors show.
struct Target {
  std::string url;
  std::string display;  // the URL itself for http(s); "s3://bucket/key" for S3
  // An S3 object: requests signed as its configuration says, S3's error bodies read.
  std::shared_ptr<const s3::Config> s3;
};
std::unique_ptr<ByteStream> open_target_stream(Target target, const StreamOptions& options);
// A HEAD request to the target, with the options' retries (http_head, http_stream.h); for
// an S3 target signed, and its 5xx retried too. The status is the caller's to judge.
HttpHead head_target(const Target& target, const StreamOptions& options);

}  // namespace dataecho::http
