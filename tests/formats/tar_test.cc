// tar (WebDataset) shards made by GNU tar, read through libarchive.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dataecho/formats/tar.h"
#include "dataecho/spec/build.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::temp_dir;

using testing::write_file;

std::string jpg_bytes(int shard, int i) {
  std::string s = "\xff\xd8 fake jpeg " + std::to_string(shard) + "/" + std::to_string(i);
  s.append(static_cast<size_t>(700 * (i + 1)),
           static_cast<char>(i));  // spans several 512-byte blocks
  return s;
}

// Shard k: samples sample{k}{i}.{jpg,cls,json}, i < n; `skip_cls` drops one .cls file.
void make_samples(const std::string& dir, int shard, int n, int skip_cls = -1) {
  for (int i = 0; i < n; ++i) {
    std::string key = dir + "/sample" + std::to_string(shard) + std::to_string(i);
    write_file(key + ".jpg", jpg_bytes(shard, i));
    if (i != skip_cls) write_file(key + ".cls", std::to_string(shard * 10 + i) + "\n");
    write_file(key + ".json", "{\"i\": " + std::to_string(i) + "}");
  }
}

void gnu_tar(const std::string& args) {
  std::string cmd = "tar --sort=name " + args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::string make_shards(int shards, int n, const std::string& flags = "-cf",
                        const std::string& ext = "tar") {
  std::string dir = temp_dir();
  for (int k = 0; k < shards; ++k) {
    std::string src = dir + "/src" + std::to_string(k);
    make_samples(src, k, n);
    gnu_tar(flags + " " + dir + "/shard-" + std::to_string(k) + "." + ext + " -C " + src + " .");
  }
  return dir;
}

std::unique_ptr<Pipeline> build_in(const std::string& dir, const std::string& spec) {
  return build_pipeline(parse_spec_text(spec, "test"), BuildOptions{dir});
}
std::vector<Example> run_in(const std::string& dir, const std::string& spec) {
  auto p = build_in(dir, spec);
  return testing::drain(*p);
}

TEST(Tar, ReadsGnuTarShards) {
  std::string dir = make_shards(2, 4);
  auto v = run_in(dir, R"({"source": {"kind": "tar", "uri": "shard-{0..1}.tar"}})");
  ASSERT_EQ(v.size(), 8u);
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 4; ++i) {
      const Example& e = v[static_cast<size_t>(k * 4 + i)];
      EXPECT_EQ(e.id(), (int64_t{k} << 40) | i);
      EXPECT_EQ(e.get("jpg").bytes(), jpg_bytes(k, i));
      EXPECT_EQ(e.get("jpg").dtype(), DType::kUInt8);
      EXPECT_EQ(e.get("cls").item<int64_t>(), k * 10 + i);
      EXPECT_EQ(e.get("json").bytes(), "{\"i\": " + std::to_string(i) + "}");
      EXPECT_EQ(e.fields().size(), 3u);
    }
  }
}

TEST(Tar, FieldsSelectAndRename) {
  std::string dir = make_shards(1, 3);
  auto v = run_in(
      dir,
      R"({"source": {"kind": "tar", "uri": "shard-0.tar", "fields": {"image": "jpg", "label": "cls"}}})");
  ASSERT_EQ(v.size(), 3u);
  ASSERT_EQ(v[2].fields().size(), 2u);
  EXPECT_EQ(v[2].fields()[0].first, "image");
  EXPECT_EQ(v[2].get("label").item<int64_t>(), 2);
}

TEST(Tar, CompressedShardsReadTheSameAndRestore) {
  std::string dir = make_shards(2, 3, "-czf", "tar.gz");
  auto v = run_in(dir, R"({"source": {"kind": "tar", "uri": "shard-*.tar.gz"}})");
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[4].get("jpg").bytes(), jpg_bytes(1, 1));
  testing::expect_save_restore_identical(
      R"({"source": {"kind": "tar", "uri": ")" + dir + R"(/shard-*.tar.gz"}})", {1, 3, 4});
}

TEST(Tar, SaveRestoreSeeksInPlainShards) {
  std::string dir = make_shards(2, 5);
  testing::expect_save_restore_identical(
      R"({"source": {"kind": "tar", "uri": ")" + dir + R"(/shard-*.tar"}})", {0, 1, 4, 5, 7, 10});
  testing::expect_save_restore_identical(
      R"({"source": {"kind": "tar", "uri": ")" + dir +
          R"(/shard-*.tar"}, "stages": [{"op": "interleave", "cycle": 2}]})",
      {3});
}

// shard-0: sample 2 lacks its .cls; shard-1: fine.
std::string missing_field_shards() {
  std::string dir = temp_dir();
  make_samples(dir + "/a", 0, 4, 2);
  make_samples(dir + "/b", 1, 2);
  gnu_tar("-cf " + dir + "/shard-0.tar -C " + dir + "/a .");
  gnu_tar("-cf " + dir + "/shard-1.tar -C " + dir + "/b .");
  return dir;
}
const char* kFieldsSpec =
    R"({"source": {"kind": "tar", "uri": ["shard-0.tar", "shard-1.tar"], "fields": ["jpg", "cls"], "on_error": "%s"}})";
std::string fields_spec(const std::string& policy) {
  std::string s = kFieldsSpec;
  return s.replace(s.find("%s"), 2, policy);
}

TEST(Tar, SampleWithoutItsFieldsUnderEveryPolicy) {
  std::string dir = missing_field_shards();
  std::string msg = error_of([&] { run_in(dir, fields_spec("fail")); });
  EXPECT_NE(msg.find("tar entry without its fields"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has no .cls"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/shard-0.tar record 2 at byte "), std::string::npos) << msg;

  auto p = build_in(dir, fields_spec("skip"));
  auto v = testing::drain(*p);
  int64_t s1 = int64_t{1} << 40;
  EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{0, 1, 3, s1, s1 + 1}));
  EXPECT_EQ(p->stats().nodes()[0]->counter("skipped").load(), 1);

  p = build_in(dir, fields_spec("echo"));
  v = testing::drain(*p);
  EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{0, 1, 1, 3, s1, s1 + 1}));
  EXPECT_EQ(testing::echoes(v), (std::vector<int32_t>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(p->stats().nodes()[0]->counter("repaired").load(), 1);
}

TEST(Tar, BadLabelIsABadSample) {
  std::string dir = temp_dir();
  make_samples(dir + "/a", 0, 3);
  write_file(dir + "/a/sample01.cls", "seven\n");
  gnu_tar("-cf " + dir + "/s.tar -C " + dir + "/a .");
  std::string msg =
      error_of([&] { run_in(dir, R"({"source": {"kind": "tar", "uri": "s.tar"}})"); });
  EXPECT_NE(msg.find("not a decimal integer"), std::string::npos) << msg;
  auto v = run_in(dir, R"({"source": {"kind": "tar", "uri": "s.tar", "on_error": "skip"}})");
  EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{0, 2}));
}

// A symbolic or hard link holds no data in the archive: its sample is a bad sample that
// names the link, never a sample silently missing that field (or holding it empty).
TEST(Tar, LinksAreBadSamplesThatNameTheLink) {
  for (const char* kind : {"-s", ""}) {
    SCOPED_TRACE(*kind ? "symbolic link" : "hard link");
    std::string dir = temp_dir();
    make_samples(dir + "/a", 0, 3);
    std::filesystem::remove(dir + "/a/sample01.jpg");
    std::string cmd = std::string("ln ") + kind + " " +
                      (*kind ? "sample00.jpg" : dir + "/a/sample00.jpg") + " " + dir +
                      "/a/sample01.jpg";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    gnu_tar("-cf " + dir + "/s.tar -C " + dir + "/a .");
    std::string msg =
        error_of([&] { run_in(dir, R"({"source": {"kind": "tar", "uri": "s.tar"}})"); });
    EXPECT_NE(msg.find("tar entry './sample01.jpg' is a " +
                       std::string(*kind ? "symbolic" : "hard") + " link"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("only regular files are read"), std::string::npos) << msg;
    auto v = run_in(dir, R"({"source": {"kind": "tar", "uri": "s.tar", "on_error": "skip"}})");
    EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{0, 2}));
    for (const auto& e : v) EXPECT_EQ(e.get("jpg").shape()[0] > 0, true);
  }
}

TEST(Tar, CorruptArchivesEndTheFileAndCountTheLoss) {
  std::string dir = make_shards(2, 4);
  std::string path = dir + "/shard-0.tar";
  auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);  // cut inside a sample's data
  std::string msg =
      error_of([&] { run_in(dir, R"({"source": {"kind": "tar", "uri": "shard-*.tar"}})"); });
  EXPECT_NE(msg.find("tar archive"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + " record "), std::string::npos) << msg;

  auto p =
      build_in(dir, R"({"source": {"kind": "tar", "uri": "shard-*.tar", "on_error": "skip"}})");
  auto v = testing::drain(*p);
  ASSERT_GE(v.size(), 4u);
  EXPECT_LT(v.size(), 8u);
  int64_t s1 = int64_t{1} << 40;
  EXPECT_EQ(v[v.size() - 4].id(), s1) << "the next shard is read in full";
  EXPECT_GT(p->stats().nodes()[0]->counter("bytes_lost").load(), 0);
  for (size_t i = 0; i + 4 < v.size(); ++i)
    EXPECT_EQ(v[i].get("jpg").bytes(), jpg_bytes(0, static_cast<int>(i)));

  write_file(dir + "/junk.tar", std::string(3000, 'j'));
  msg = error_of([&] { run_in(dir, R"({"source": {"kind": "tar", "uri": "junk.tar"}})"); });
  EXPECT_NE(msg.find("junk.tar"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tar archive"), std::string::npos) << msg;
}

TEST(Tar, ReaderGroupsEntriesBySampleKey) {
  std::string dir = make_shards(1, 2);
  TarReader r(open_stream(dir + "/shard-0.tar"));
  TarSample s;
  ASSERT_EQ(r.next(&s), TarReader::Status::kOk);
  EXPECT_EQ(s.key, "./sample00");
  ASSERT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.entries[0].first, "cls");
  EXPECT_EQ(s.offset, 512u) << "after the ./ directory entry";
  ASSERT_EQ(r.next(&s), TarReader::Status::kOk);
  EXPECT_EQ(s.key, "./sample01");
  EXPECT_EQ(r.next(&s), TarReader::Status::kEnd);
}

}  // namespace
}  // namespace dataecho
