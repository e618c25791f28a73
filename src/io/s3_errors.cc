// s3_errors.h: S3's error answers turned into retries or named errors.
#include "s3_errors.h"

#include "dataecho/core/error.h"
#include "s3_uri.h"
#include "s3_xml.h"

namespace dataecho::s3 {
namespace {

constexpr size_t kMaxQuoted = 300;  // of the server's message

bool one_of(const std::string& code, std::initializer_list<const char*> codes) {
  for (const char* c : codes)
    if (code == c) return true;
  return false;
}

bool is_retryable(long status, const std::string& code) {
  if (one_of(code,
             {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout",
              "RequestTimeoutException", "Throttling", "ThrottlingException", "RequestThrottled"}))
    return true;
  return code.empty() ? status >= 500 || status == 408 || status == 429 : status >= 500;
}

// "HTTP 404 NoSuchKey: The specified key does not exist."
std::string what_server_said(long status, const ErrorBody& e) {
  std::string s = "HTTP " + std::to_string(status);
  if (!e.code.empty()) s += " " + e.code;
  if (!e.message.empty())
    s += ": " +
         (e.message.size() > kMaxQuoted ? e.message.substr(0, kMaxQuoted) + "..." : e.message);
  return s;
}

// A redirect to, or a signature refused for, another region: which one, and how to say so.
std::string wrong_region(long status, const ErrorBody& e, const Reply& r,
                         const std::string& region) {
  const std::string there = !r.region_header.empty() ? r.region_header : e.region;
  const bool redirect =
      status == 301 || status == 307 || one_of(e.code, {"PermanentRedirect", "TemporaryRedirect"});
  const bool malformed = one_of(e.code, {"AuthorizationHeaderMalformed"}) && !e.region.empty();
  if (!redirect && !malformed) return "";
  if (!there.empty() && there != region)
    return "the bucket is in region " + there + ", not " + region +
           ": set \"s3\": {\"region\": \"" + there + "\"} or AWS_REGION";
  if (!e.endpoint.empty())
    return "the bucket must be addressed at the endpoint " + e.endpoint +
           ": set \"s3\": {\"endpoint\": ...} or AWS_ENDPOINT_URL";
  return redirect ? "the server redirects this request elsewhere (redirects are not followed: "
                    "set the bucket's region or endpoint)"
                  : "";
}

// What is wrong, in words, with the ErrorCode to throw; "" for a code without words here.
std::string meaning(long status, const ErrorBody& e, ErrorCode* code) {
  *code = ErrorCode::kInvalidArgument;
  if (e.code == "NoSuchKey" || (e.code.empty() && status == 404)) {
    *code = ErrorCode::kNotFound;
    return "no such key";
  }
  if (e.code == "NoSuchBucket") {
    *code = ErrorCode::kNotFound;
    return "no such bucket";
  }
  if (e.code == "AccessDenied" || (e.code.empty() && status == 403)) {
    *code = ErrorCode::kIo;
    return "access denied (the credentials' policy does not allow this request on this key)";
  }
  if (e.code == "InvalidAccessKeyId") return "the access key id is not known to the server";
  if (e.code == "SignatureDoesNotMatch")
    return "the secret access key does not match the key id (or the request was altered)";
  if (one_of(e.code, {"ExpiredToken", "TokenRefreshRequired"}))
    return "the session token has expired: get fresh credentials";
  if (e.code == "InvalidToken") return "the session token is not valid";
  if (e.code == "RequestTimeTooSkewed") {
    *code = ErrorCode::kIo;
    return "this machine's clock is off from the server's by more than 15 minutes";
  }
  if (e.code == "InvalidBucketName") return "the server refuses the bucket name";
  *code = ErrorCode::kIo;
  return "";
}

}  // namespace

Retry classify_reply(const Reply& r, const std::string& display, const std::string& region,
                     const std::string& action) {
  const ErrorBody e = parse_error_body(r.body);
  const std::string said = what_server_said(r.status, e);
  if (is_retryable(r.status, e.code)) return {said, e.code == "SlowDown"};
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string why = wrong_region(r.status, e, r, region);
  if (why.empty()) why = meaning(r.status, e, &code);
  if (why.empty()) why = action + " failed";
  throw Error(code, kStage, why + " (" + said + "; not retried)", display);
}

}  // namespace dataecho::s3
