// A pipeline reading a signed URL with credentials that fails: the error names the URL
// without its userinfo and query (secrets never appear in error messages).
#include <gtest/gtest.h>

#include <string>

#include "dataecho/spec/build.h"

namespace dataecho {
namespace {

TEST(RedactPipeline, AFailedSignedUrlIsReportedWithoutItsSecrets) {
  // Port 1 on loopback refuses connections; no retries, so it fails at once.
  const nlohmann::json spec = {{"source",
                                {{"kind", "tfrecord"},
                                 {"uri",
                                  "http://reader:s3cretpass@127.0.0.1:1/train-00000.tfrecord"
                                  "?X-Amz-Security-Token=tok3n&X-Amz-Signature=sig4ture"},
                                 {"http", {{"max_retries", 0}, {"connect_timeout_s", 2}}}}},
                               {"stages", nlohmann::json::array()}};
  std::string what;
  try {
    auto p = build_pipeline(spec);
    while (p->next()) {
    }
  } catch (const Error& e) {
    what = e.what();
  }
  ASSERT_FALSE(what.empty()) << "expected the read to fail";
  for (const char* secret : {"s3cretpass", "tok3n", "sig4ture", "reader:"})
    EXPECT_EQ(what.find(secret), std::string::npos) << what;
  EXPECT_NE(what.find("http://***@127.0.0.1:1/train-00000.tfrecord?<redacted>"), std::string::npos)
      << what;
}

}  // namespace
}  // namespace dataecho
