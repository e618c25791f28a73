#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dataecho/io/byte_stream.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::temp_dir;

class UriExpand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    for (int i = 0; i < 8; ++i) touch("train-0000" + std::to_string(i) + "-of-00008.tfrecord");
    touch("val-00000.tfrecord");
    std::filesystem::create_directories(dir_ + "/sub.tfrecord");  // a directory: never a shard
  }
  void touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << "x"; }
  std::string dir_;
};

TEST_F(UriExpand, BraceRangeKeepsZeroPadding) {
  auto got = expand_uris({"train-{00000..00007}-of-00008.tfrecord"}, dir_);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0], dir_ + "/train-00000-of-00008.tfrecord");
  EXPECT_EQ(got[7], dir_ + "/train-00007-of-00008.tfrecord");
}

TEST_F(UriExpand, GlobIsSortedAndSkipsDirectories) {
  auto got = expand_uris({dir_ + "/*.tfrecord"});
  ASSERT_EQ(got.size(), 9u);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.back(), dir_ + "/val-00000.tfrecord");
}

TEST_F(UriExpand, ListKeepsOrderAndRelativePathsUseBaseDir) {
  auto got = expand_uris({"val-00000.tfrecord", "train-0000[12]-of-00008.tfrecord"}, dir_);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], dir_ + "/val-00000.tfrecord");
  EXPECT_EQ(got[1], dir_ + "/train-00001-of-00008.tfrecord");
  EXPECT_EQ(got[2], dir_ + "/train-00002-of-00008.tfrecord");
  // An absolute path ignores base_dir; file:// is a local path.
  EXPECT_EQ(expand_uris({"file://" + dir_ + "/val-00000.tfrecord"}, "/elsewhere")[0],
            dir_ + "/val-00000.tfrecord");
}

TEST_F(UriExpand, HttpUrlsExpandBracesOnly) {
  auto got = expand_uris({"http://127.0.0.1:8080/train-{00..02}.tfrecord", "https://h/a*b"}, dir_);
  std::vector<std::string> want = {"http://127.0.0.1:8080/train-00.tfrecord",
                                   "http://127.0.0.1:8080/train-01.tfrecord",
                                   "http://127.0.0.1:8080/train-02.tfrecord", "https://h/a*b"};
  EXPECT_EQ(got, want);
}

TEST_F(UriExpand, CommaListsAndUnpaddedRanges) {
  auto got = expand_uris({"http://h/{a,b}-{8..10}"});
  std::vector<std::string> want = {"http://h/a-8", "http://h/a-9", "http://h/a-10",
                                   "http://h/b-8", "http://h/b-9", "http://h/b-10"};
  EXPECT_EQ(got, want);
}

TEST_F(UriExpand, PatternsMatchingNothingAreErrorsNamingThem) {
  std::string msg = error_of([&] { expand_uris({"test-*.tfrecord"}, dir_); });
  EXPECT_NE(msg.find("test-*.tfrecord"), std::string::npos) << msg;
  EXPECT_NE(msg.find("matches no file"), std::string::npos) << msg;
  msg = error_of([&] { expand_uris({"train-{00000..00008}-of-00008.tfrecord"}, dir_); });
  EXPECT_NE(msg.find("train-00008-of-00008.tfrecord"), std::string::npos) << msg;
  msg = error_of([&] { expand_uris({"x-{1..b}"}, dir_); });
  EXPECT_NE(msg.find("integer bounds"), std::string::npos) << msg;
  msg = error_of([&] { expand_uris({"x-{1..2"}, dir_); });
  EXPECT_NE(msg.find("unbalanced"), std::string::npos) << msg;
  msg = error_of([&] { expand_uris({"http://h/{0..99999999}"}); });
  EXPECT_NE(msg.find("more than"), std::string::npos) << msg;
}

// ---- manifests: `@FILE`, one shard per line ----------------------------------------

TEST_F(UriExpand, ManifestListsShardsRelativeToItsOwnFolder) {
  std::filesystem::create_directories(dir_ + "/lists");
  std::ofstream(dir_ + "/lists/train.txt")
      << "# training shards\n"
         "\n"
         "../train-00003-of-00008.tfrecord\r\n"
         "   ../val-00000.tfrecord  \n"
         "  # an indented comment\n"
      << dir_ << "/train-00000-of-00008.tfrecord\n"
      << "file://" << dir_ << "/train-00001-of-00008.tfrecord\n"
      << "http://127.0.0.1:8080/remote-{0..1}.tfrecord";  // literal: no braces, no newline
  std::vector<std::string> want = {
      dir_ + "/lists/../train-00003-of-00008.tfrecord", dir_ + "/lists/../val-00000.tfrecord",
      dir_ + "/train-00000-of-00008.tfrecord", dir_ + "/train-00001-of-00008.tfrecord",
      "http://127.0.0.1:8080/remote-{0..1}.tfrecord"};
  // Relative to base_dir, absolute, and mixed with ordinary entries (order kept).
  EXPECT_EQ(expand_uris({"@lists/train.txt"}, dir_), want);
  EXPECT_EQ(expand_uris({"@" + dir_ + "/lists/train.txt"}, "/elsewhere"), want);
  auto got = expand_uris(
      {"val-00000.tfrecord", "@lists/train.txt", "train-0000{6..7}-of-00008.tfrecord"}, dir_);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0], dir_ + "/val-00000.tfrecord");
  EXPECT_EQ(std::vector<std::string>(got.begin() + 1, got.begin() + 6), want);
  EXPECT_EQ(got[7], dir_ + "/train-00007-of-00008.tfrecord");
}

TEST_F(UriExpand, ManifestErrorsNameTheManifestAndLine) {
  std::string msg = error_of([&] { expand_uris({"@missing.txt"}, dir_); });
  EXPECT_NE(msg.find("@missing.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;

  std::ofstream(dir_ + "/bad.txt") << "val-00000.tfrecord\n# c\nnope.tfrecord\n";
  msg = error_of([&] { expand_uris({"@bad.txt"}, dir_); });
  EXPECT_NE(msg.find("@bad.txt line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir_ + "/nope.tfrecord"), std::string::npos) << msg;

  std::ofstream(dir_ + "/dir.txt") << "sub.tfrecord\n";
  msg = error_of([&] { expand_uris({"@dir.txt"}, dir_); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;

  std::ofstream(dir_ + "/empty.txt") << "# nothing here\n\n  \n";
  msg = error_of([&] { expand_uris({"@empty.txt"}, dir_); });
  EXPECT_NE(msg.find("manifest lists no shard"), std::string::npos) << msg;

  msg = error_of([&] { expand_uris({"@"}, dir_); });
  EXPECT_NE(msg.find("needs a manifest"), std::string::npos) << msg;
  msg = error_of([&] { expand_uris({"@sub.tfrecord"}, dir_); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho
