// libcurl 7.88's AWS Signature V4, as io signs S3 requests (configure_common with an S3
// configuration), checked against the signatures AWS documents for its S3 examples
// (docs.aws.amazon.com, "Signature Calculations for the Authorization Header": GET Object
// and GET Bucket (List Objects)), recorded by a loopback server: proof of the signatures
// independent of the S3 test server's own checker. And what an s3:// open checks before
// any request.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"
#include "io/http_common.h"
#include "io/http_connections.h"
#include "io/s3_stream.h"
#include "recording_server.h"
#include "s3_test_env.h"
#include "test_util.h"

namespace dataecho::s3 {
namespace {

using dataecho::testing::error_of;
using dataecho::testing::RecordedRequest;
using dataecho::testing::RecordingServer;
using dataecho::testing::ScopedAwsEnv;
using dataecho::testing::ScriptedAnswer;

Config aws_example(const std::string& token = "") {
  Config c;
  c.region = "us-east-1";
  c.credentials = {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", token};
  return c;
}

// One request to `url` (examplebucket.s3.amazonaws.com, sent to the loopback server),
// signed with `config` at AWS's example time, with `extra` headers; the request received.
RecordedRequest signed_request(const Config& config, const std::string& url,
                               const std::vector<std::string>& extra) {
  RecordingServer server([](int, const RecordedRequest&) { return ScriptedAnswer{}; });
  http::ensure_curl_initialized();
  CURL* easy = curl_easy_init();
  curl_slist* headers = nullptr;
  for (const std::string& h : extra) headers = curl_slist_append(headers, h.c_str());
  for (const std::string& h : request_headers(config))
    headers = curl_slist_append(headers, h.c_str());
  headers = curl_slist_append(headers, "x-amz-date: 20130524T000000Z");
  char errbuf[CURL_ERROR_SIZE] = {0};
  http::configure_common(easy, url, StreamOptions{}, headers, errbuf, &config);
  const std::string to =
      "examplebucket.s3.amazonaws.com:80:127.0.0.1:" + std::to_string(server.port());
  curl_slist* connect_to = curl_slist_append(nullptr, to.c_str());
  curl_easy_setopt(easy, CURLOPT_CONNECT_TO, connect_to);
  EXPECT_EQ(curl_easy_perform(easy), CURLE_OK) << errbuf;
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect_to);
  const auto requests = server.requests();
  EXPECT_EQ(requests.size(), 1u);
  return requests.empty() ? RecordedRequest{} : requests.back();
}

const char* kCredential =
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, ";

TEST(S3Signing, CurlSignsAwsDocumentedGetObjectExample) {
  const RecordedRequest r = signed_request(
      aws_example(), "http://examplebucket.s3.amazonaws.com/test.txt", {"Range: bytes=0-9"});
  EXPECT_EQ(r.header("Authorization"),
            std::string(kCredential) +
                "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(r.header("x-amz-content-sha256"), kEmptyPayloadSha256);
  EXPECT_EQ(r.header("x-amz-security-token"), "");
}

TEST(S3Signing, CurlSignsAwsDocumentedListObjectsExample) {
  const RecordedRequest r = signed_request(
      aws_example(), "http://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", {});
  EXPECT_EQ(r.target(), "/?max-keys=2&prefix=J");
  EXPECT_EQ(r.header("Authorization"),
            std::string(kCredential) +
                "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3Signing, SessionTokenHeaderIsSentAndSigned) {
  const std::string token = "FQoGZXIvYXdzEXAMPLE+token/==";
  const RecordedRequest r =
      signed_request(aws_example(token), "http://examplebucket.s3.amazonaws.com/test.txt", {});
  EXPECT_EQ(r.header("x-amz-security-token"), token);
  EXPECT_CONTAINS(r.header("Authorization"),
                  "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, ");
}

TEST(S3Signing, AnonymousRequestsAreNotSigned) {
  Config c;
  c.region = "us-east-1";
  c.anonymous = true;
  const RecordedRequest r = signed_request(c, "http://examplebucket.s3.amazonaws.com/test.txt", {});
  EXPECT_EQ(r.header("Authorization"), "");
}

// The error of opening "s3://bkt/k" with `o`.
std::string open_error(const StreamOptions& o) {
  return error_of([&] { open_stream("s3://bkt/k", o); });
}

TEST(S3Stream, NoCredentialsSaysWhereItLookedBeforeAnyRequest) {
  ScopedAwsEnv env;
  RecordingServer server([](int, const RecordedRequest&) {
    return ScriptedAnswer{200, "", "data"};
  });
  StreamOptions o;
  o.s3.endpoint = server.endpoint();
  const std::string e = open_error(o);
  EXPECT_CONTAINS(e,
                  "s3: no AWS credentials found: looked in AWS_ACCESS_KEY_ID/"
                  "AWS_SECRET_ACCESS_KEY (not set), ");
  EXPECT_CONTAINS(e, "(s3://bkt/k)");
  EXPECT_EQ(server.requests().size(), 0u);
}

TEST(S3Stream, RefusesPlainHttpBeyondLoopbackAndAnAuthorizationHeader) {
  ScopedAwsEnv env;
  env.set("AWS_ACCESS_KEY_ID", "AKIDTEST");
  env.set("AWS_SECRET_ACCESS_KEY", "a-secret-of-the-test");
  RecordingServer server([](int, const RecordedRequest&) {
    return ScriptedAnswer{200, "", "data"};
  });
  StreamOptions o;
  o.s3.endpoint = "http://store.example:9000";
  EXPECT_CONTAINS(open_error(o),
                  "refusing to send signed requests over plain http to http://store.example:9000");
  o.s3.endpoint = server.endpoint();
  o.headers = {"Authorization: Bearer x"};
  EXPECT_CONTAINS(open_error(o), "an Authorization header in \"http\": {\"headers\"}");
  EXPECT_EQ(server.requests().size(), 0u);
  o.headers.clear();
  auto stream = open_stream("s3://bkt/k", o);  // loopback: allowed
  char buf[8];
  EXPECT_EQ(stream->read_fully(buf, sizeof buf), 4u);
  EXPECT_EQ(stream->uri(), "s3://bkt/k");
}

}  // namespace
}  // namespace dataecho::s3
