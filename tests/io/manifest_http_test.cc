// Manifests over HTTP (a real nginx): `@http://.../train.manifest` lists the shards, one
// per line, relative lines resolved against the manifest's URL; the dataset read through
// it equals the same shards read locally.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/io/byte_stream.h"
#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::NginxServer;

// "@" + url (built with append: GCC 12 warns falsely on `"@" + std::string`, bug 105329).
std::string at(const std::string& url) {
  std::string s = "@";
  s += url;
  return s;
}

class ManifestHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir();
    std::filesystem::create_directories(dir_ + "/data");
    std::filesystem::create_directories(dir_ + "/lists");
    std::mt19937_64 rng(5);
    for (int shard = 0; shard < 3; ++shard) {
      std::string name = "data/train-" + std::to_string(shard) + ".tfrecord";
      TfRecordWriter w(dir_ + "/" + name);
      for (int i = 0; i < 20; ++i) {
        std::string rec(rng() % 5000, '\0');
        for (auto& c : rec) c = static_cast<char>(rng());
        w.write(rec);
      }
      w.close();
    }
    nginx_.start(dir_);
    // Three ways to name a shard: relative to the manifest, origin-relative, absolute.
    std::ofstream(dir_ + "/lists/train.manifest") << "# shards of the training set\r\n"
                                                     "../data/train-0.tfrecord\r\n"
                                                     "\r\n"
                                                     "/data/train-1.tfrecord\r\n"
                                                  << nginx_.url("data/train-2.tfrecord") << "\r\n";
  }

  std::string spec(const std::vector<std::string>& uris) const {
    nlohmann::json s = {{"source", {{"kind", "tfrecord"}, {"uri", uris}, {"raw", true}}}};
    return s.dump();
  }

  std::string dir_;
  NginxServer nginx_;
};

TEST_F(ManifestHttp, LinesResolveAgainstTheManifestUrl) {
  std::vector<std::string> want = {nginx_.url("lists/../data/train-0.tfrecord"),
                                   nginx_.url("data/train-1.tfrecord"),
                                   nginx_.url("data/train-2.tfrecord")};
  EXPECT_EQ(expand_uris({at(nginx_.url("lists/train.manifest"))}), want);
  // A query string is not part of the manifest's directory.
  EXPECT_EQ(expand_uris({at(nginx_.url("lists/train.manifest?v=2"))}), want);
}

TEST_F(ManifestHttp, DatasetThroughManifestEqualsLocalShards) {
  auto local = testing::run(spec({dir_ + "/data/train-{0..2}.tfrecord"}));
  auto remote = testing::run(spec({at(nginx_.url("lists/train.manifest"))}));
  ASSERT_EQ(local.size(), 60u);
  ASSERT_EQ(remote.size(), local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(remote[i].id(), local[i].id()) << i;
    EXPECT_TRUE(remote[i].get("record").bytes() == local[i].get("record").bytes()) << i;
  }
}

TEST_F(ManifestHttp, MissingManifestFailsWithItsUrlAndStatus) {
  std::string url = nginx_.url("lists/nope.manifest");
  std::string msg = testing::error_of([&] { expand_uris({at(url)}); });
  EXPECT_NE(msg.find("cannot read manifest"), std::string::npos) << msg;
  EXPECT_NE(msg.find("404"), std::string::npos) << msg;
  EXPECT_NE(msg.find(at(url)), std::string::npos) << msg;
  // And through a spec, with the JSON path.
  msg = testing::error_of([&] { testing::build(spec({at(url)})); });
  EXPECT_NE(msg.find("$.source.uri"), std::string::npos) << msg;
}

// Presigned URLs expire: a run resumes with a freshly signed manifest. The spec (and so
// the state's fingerprint) names the manifest, the state names shards by position, and
// neither holds a signature.
TEST_F(ManifestHttp, AResumeWithAFreshlySignedManifestContinuesExactly) {
  const std::string manifest = dir_ + "/lists/signed.manifest";
  auto sign = [&](const std::string& signature) {
    std::ofstream m(manifest, std::ios::trunc);
    for (int shard = 0; shard < 3; ++shard)
      m << nginx_.url("data/train-" + std::to_string(shard) + ".tfrecord")
        << "?X-Amz-Expires=60&X-Amz-Signature=" << signature << "\n";
  };
  sign("f1rstsig");
  nlohmann::json spec = {{"seed", 3},
                         {"source", {{"kind", "tfrecord"}, {"uri", at(manifest)}, {"raw", true}}},
                         {"stages", nlohmann::json::array({{{"op", "shuffle"}, {"buffer", 10}}})}};
  const auto full = testing::run(spec.dump());
  ASSERT_EQ(full.size(), 60u);

  auto first = testing::build(spec.dump());
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(first->next().has_value());
  const std::string state = first->save();
  EXPECT_EQ(state.find("f1rstsig"), std::string::npos);
  first.reset();

  sign("s3condsig");  // the old signature has expired; the manifest is signed again
  auto resumed = testing::build(spec.dump());
  resumed->restore(state);
  size_t i = 25;
  while (auto e = resumed->next()) {
    ASSERT_LT(i, full.size());
    EXPECT_EQ(e->id(), full[i].id()) << i;
    EXPECT_TRUE(e->get("record").bytes() == full[i].get("record").bytes()) << i;
    ++i;
  }
  EXPECT_EQ(i, full.size());
}

}  // namespace
}  // namespace dataecho
