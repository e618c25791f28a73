// s3_stream.h: signing S3 requests and opening s3:// objects.
#include "s3_stream.h"

#include <strings.h>

#include "dataecho/core/error.h"
#include "http_common.h"

namespace dataecho::s3 {
namespace {

// Whether `url`'s host is this machine (127.0.0.0/8, localhost, [::1]).
bool is_loopback(const std::string& url) {
  const size_t start = url.find("://") + 3;
  std::string host = url.substr(start, url.find_first_of("/?#", start) - start);
  if (host.rfind("[::1]", 0) == 0) return true;
  host = host.substr(0, host.find(':'));
  return host == "localhost" || host.rfind("127.", 0) == 0;
}

// The checks made before anything is sent.
void check_request(const Config& config, const std::string& url, const StreamOptions& options,
                   const std::string& display) {
  for (const std::string& h : options.headers)
    if (strncasecmp(h.c_str(), "authorization:", 14) == 0)
      throw Error(ErrorCode::kInvalidArgument, kStage,
                  "an Authorization header in \"http\": {\"headers\"} would replace the S3 "
                  "signature: leave it out (credentials come from the environment or ~/.aws)",
                  display);
  const bool plain = strncasecmp(url.c_str(), "http://", 7) == 0;
  if (plain && !config.anonymous && !is_loopback(url) && !options.plain_http_credentials)
    throw Error(ErrorCode::kInvalidArgument, kStage,
                "refusing to send signed requests over plain http to " + config.endpoint +
                    " (the session token and the signatures could be read and replayed): use "
                    "https, or set \"http\": {\"plain_http_credentials\": true}",
                display);
}

}  // namespace

void configure_request(CURL* easy, const Config& config) {
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_FAILONERROR, 0L);
  curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
  if (config.anonymous) return;
  const std::string sigv4 = "aws:amz:" + config.region + ":s3";
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4.c_str());  // libcurl copies strings
  curl_easy_setopt(easy, CURLOPT_USERNAME, config.credentials.key_id.c_str());
  curl_easy_setopt(easy, CURLOPT_PASSWORD, config.credentials.secret.c_str());
}

std::vector<std::string> request_headers(const Config& config) {
  std::vector<std::string> h = {std::string("x-amz-content-sha256: ") + kEmptyPayloadSha256};
  if (!config.anonymous && !config.credentials.token.empty())
    h.push_back("x-amz-security-token: " + config.credentials.token);
  return h;
}

std::unique_ptr<ByteStream> open_s3_stream(const std::string& uri, const StreamOptions& options) {
  const ObjectUri object = parse_uri(uri);
  http::Target target;
  target.display = object.display();
  auto config = std::make_shared<const Config>(resolve_config(options.s3, target.display));
  target.url = object_url(config->endpoint, config->addressing, object.bucket, object.key);
  check_request(*config, target.url, options, target.display);
  target.s3 = std::move(config);
  return http::open_target_stream(std::move(target), options);
}

}  // namespace dataecho::s3
