// Credentials and signed query strings never reach a printed or written text (redact.h),
// and so never an Error: secrets never appear in error messages.
#include "dataecho/core/redact.h"

#include <gtest/gtest.h>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

TEST(Redact, UserinfoAndTheWholeQueryStringGo) {
  EXPECT_EQ(redact_urls("https://user:pa55@store.example:8443/bucket/train-00001.tfrecord"
                        "?X-Amz-Credential=AKIA&X-Amz-Signature=deadbeef"),
            "https://***@store.example:8443/bucket/train-00001.tfrecord?<redacted>");
  EXPECT_EQ(redact_urls("HTTP://token@H/x?sig=1#part"), "HTTP://***@H/x?<redacted>#part");
  EXPECT_EQ(redact_urls("http://h/x?"), "http://h/x?");  // nothing to hide
}

TEST(Redact, TextAroundAndBetweenUrlsIsKept) {
  EXPECT_EQ(redact_urls("GET failed with HTTP 403 (https://h/a.tar?se=2026&sig=abc) after "
                        "\"http://u:p@h2/b\" and http://h3/c"),
            "GET failed with HTTP 403 (https://h/a.tar?<redacted>) after \"http://***@h2/b\" "
            "and http://h3/c");
}

TEST(Redact, TextWithoutSecretsIsUnchanged) {
  for (const char* s : {"", "no url here", "http://127.0.0.1:8080/x.tfrecord",
                        "/data/train-{00000..00007}-of-00008.tfrecord record 4 at byte 18",
                        "https://h/train-{00000..00003}.tar", "file:///tmp/a?b"})
    EXPECT_EQ(redact_urls(s), s);
}

TEST(Redact, AnErrorNeverCarriesTheSecret) {
  const Error e(ErrorCode::kIo, "http", "GET https://me:hunter2@h/x?X-Goog-Signature=s3cr3t failed",
                "https://me:hunter2@h/x?X-Goog-Signature=s3cr3t");
  for (const std::string& text : {std::string(e.what()), e.message(), e.input()}) {
    EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
    EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << text;
    EXPECT_NE(text.find("https://***@h/x?<redacted>"), std::string::npos) << text;
  }
  const Error outer = e.with_context("3:map", "id 7");
  EXPECT_EQ(std::string(outer.what()).find("hunter2"), std::string::npos);
}

TEST(Redact, JsonStringsAtAnyDepth) {
  const nlohmann::json j = {
      {"source", {{"kind", "tfrecord"}, {"uri", {"https://a:b@h/1?t=x", "local.tfrecord"}}}},
      {"steps", 3}};
  const nlohmann::json r = redact_json_urls(j);
  EXPECT_EQ(r["source"]["uri"][0], "https://***@h/1?<redacted>");
  EXPECT_EQ(r["source"]["uri"][1], "local.tfrecord");
  EXPECT_EQ(r["steps"], 3);
}

TEST(Redact, RegisteredSecretsAreReplacedEverywhere) {
  const std::string secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzSECRET";
  const std::string token = "FQoGZXIvYXdzEXAMPLETOKENzz+/=";
  EXPECT_EQ(redact_urls("key " + secret), "key " + secret);  // not yet registered
  register_secret(secret);
  register_secret(token);
  register_secret("short");  // too short to be told from ordinary words: not registered
  EXPECT_EQ(redact_urls("a " + secret + " b " + token + secret),
            "a <redacted> b <redacted><redacted>");
  EXPECT_EQ(redact_urls("a short word"), "a short word");
  const Error e(ErrorCode::kIo, "s3", "signed with " + secret, "s3://b/k?" + token);
  for (const std::string& text : {std::string(e.what()), e.message(), e.input()}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << text;
    EXPECT_EQ(text.find("EXAMPLETOKEN"), std::string::npos) << text;
  }
  const nlohmann::json j = redact_json_urls({{"x", {"secret is " + secret}}});
  EXPECT_EQ(j["x"][0], "secret is <redacted>");
}

TEST(Redact, S3UrisKeepBucketAndKey) {
  EXPECT_EQ(redact_urls("no such key (s3://my-bucket/train/a-00001.tfrecord)"),
            "no such key (s3://my-bucket/train/a-00001.tfrecord)");
  EXPECT_EQ(redact_urls("S3://id:secret@bucket/k?versionId=x#sha256=ab"),
            "S3://***@bucket/k?<redacted>#sha256=ab");
}

}  // namespace
}  // namespace dataecho
