// s3_stream.h: signing S3 requests and opening s3:// objects.
#include "s3_stream.h"

#include <fnmatch.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

#include "dataecho/core/cpu_affinity.h"
#include "dataecho/core/error.h"
#include "dataecho/core/stats.h"
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

// The whole body of a listing page (at most 64 MiB).
std::string read_listing(ByteStream& in, const std::string& display) {
  constexpr size_t kMaxPage = 64 << 20;
  std::string body;
  char buf[64 << 10];
  while (const size_t n = in.read(buf, sizeof buf)) {
    body.append(buf, n);
    if (body.size() > kMaxPage)
      throw Error(ErrorCode::kDataLoss, kStage, "a listing page is larger than 64 MiB", display);
  }
  if (body.find("<ListBucketResult") == std::string::npos)
    throw Error(ErrorCode::kDataLoss, kStage,
                "the server's answer to a listing is not S3's ListBucketResult", display);
  return body;
}

// "s3://bucket/key" resolved and checked: the request URL, what errors show, the signing.
http::Target object_target(const std::string& uri, const StreamOptions& options) {
  const ObjectUri object = parse_uri(uri);
  http::Target target;
  target.display = object.display();
  auto config = std::make_shared<const Config>(resolve_config(options.s3, target.display));
  target.url = object_url(config->endpoint, config->addressing, object.bucket, object.key);
  check_request(*config, target.url, options, target.display);
  target.s3 = std::move(config);
  return target;
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
  return http::open_target_stream(object_target(uri, options), options);
}

std::string object_request_url(const std::string& uri, const StreamOptions& options) {
  return object_target(uri, options).url;
}

HttpHead head_object(const std::string& uri, const StreamOptions& options) {
  const http::Target target = object_target(uri, options);
  const HttpHead head = http::head_target(target, options);
  if (head.status >= 300) http::open_target_stream(target, options);  // throws, naming it
  return head;
}

std::vector<ListedObject> list_objects(const std::string& bucket, const std::string& prefix,
                                       const StreamOptions& options, int max_keys) {
  const std::string display = "s3://" + bucket + "/" + prefix;
  if (max_keys < 1 || max_keys > 1000)
    throw Error(ErrorCode::kInvalidArgument, kStage,
                "max_keys must be in [1, 1000], got " + std::to_string(max_keys), display);
  auto config = std::make_shared<const Config>(resolve_config(options.s3, display));
  const std::string base = object_url(config->endpoint, config->addressing, bucket, "");
  check_request(*config, base, options, display);
  std::vector<ListedObject> out;
  std::string token;
  std::atomic<int64_t>* requests =
      options.stats ? &options.stats->counter("s3_list_requests") : nullptr;
  while (true) {
    const std::string url = base + "?" + list_query(prefix, "", token, max_keys);
    if (requests) ++*requests;
    auto stream = http::open_target_stream({url, display, config}, options);
    const std::string body = read_listing(*stream, display);
    ListPage page = parse_list_page(body);
    std::move(page.objects.begin(), page.objects.end(), std::back_inserter(out));
    if (!page.truncated) return out;
    if (page.next_token.empty() || page.next_token == token)
      throw Error(ErrorCode::kDataLoss, kStage,
                  "a truncated listing page gave no new continuation token", display);
    token = page.next_token;
  }
}

std::vector<std::string> expand_pattern(const std::string& pattern, const StreamOptions& options) {
  // The bucket is checked as in a URI; the key part may hold '?' (a glob's, not a query).
  const size_t slash = pattern.find('/', 5);
  const std::string bucket = pattern.substr(5, slash == std::string::npos ? slash : slash - 5);
  parse_uri("s3://" + bucket + "/", false);
  const std::string key = slash == std::string::npos ? "" : pattern.substr(slash + 1);
  const size_t glob = key.find_first_of("*?[");
  const std::string prefix = key.substr(0, glob);
  const std::vector<ListedObject> listed =
      list_objects(bucket, prefix, options, options.s3.max_keys);
  std::vector<std::string> out;
  for (const ListedObject& o : listed) {
    if (o.key.empty() || o.key.back() == '/') continue;
    if (glob != std::string::npos &&
        fnmatch(key.c_str(), o.key.c_str(), FNM_PATHNAME | FNM_PERIOD) != 0)
      continue;
    out.push_back("s3://" + bucket + "/" + o.key);
  }
  if (out.empty())
    throw Error(ErrorCode::kNotFound, "uri",
                "matches no key (" + std::to_string(listed.size()) + " listed under s3://" +
                    bucket + "/" + prefix + ")",
                pattern);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::vector<std::string>> expand_patterns(const std::vector<std::string>& patterns,
                                                      const StreamOptions& options) {
  std::vector<std::vector<std::string>> out(patterns.size());
  std::vector<std::exception_ptr> errors(patterns.size());
  // Patterns are taken in order, so every one before a failed one is listed to its end:
  // the first failure in order is the one a serial listing meets.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < patterns.size();) {
      try {
        out[i] = expand_pattern(patterns[i], options);
      } catch (...) {
        errors[i] = std::current_exception();
        failed.store(true);
      }
    }
  };
  const size_t width =
      std::min<size_t>(std::clamp(options.s3.list_parallelism, 1, 64), patterns.size());
  std::vector<std::thread> threads;
  try {
    while (threads.size() + 1 < width) threads.push_back(start_engine_thread(work));
  } catch (const std::system_error&) {  // no more threads: the ones started do the work
  }
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace dataecho::s3
