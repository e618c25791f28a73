// Tests of the cache stage (ops/cache.h) through the spec: in memory and on disk, the
// interrupted first pass, a stale key after a spec or source change, the refusal after a
// shuffle, the memory bound and its prefix, save/restore in every mode, a damaged file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "dataecho/ops/cache.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho {
namespace {

namespace fs = std::filesystem;
using testing::build;
using testing::drain;
using testing::error_of;
using testing::iota;
using testing::values;

std::string spec(int64_t count, const std::string& cache, const std::string& after = "",
                 const std::string& before = "") {
  return R"({"seed": 3, "source": {"kind": "range", "count": )" + std::to_string(count) +
         R"(}, "stages": [)" + before + R"({"op": "cache")" + cache + "}" + after + "]}";
}

std::string path_option(const std::string& dir) { return R"(, "path": ")" + dir + R"(")"; }

std::map<std::string, int64_t> counters(const Pipeline& p) {
  for (const auto& n : p.stats().to_json())
    if (n["name"].get<std::string>().ends_with(":cache"))
      return n["counters"].get<std::map<std::string, int64_t>>();
  return {};
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (fs::exists(dir))
    for (const auto& f : fs::directory_iterator(dir)) out.push_back(f.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> repeated(int64_t n, int times) {
  std::vector<int64_t> out;
  for (int t = 0; t < times; ++t)
    for (int64_t v : iota(n)) out.push_back(v);
  return out;
}

TEST(Cache, InMemoryLaterPassesReadTheCache) {
  auto p = build(spec(20, "", R"(, {"op": "repeat", "count": 3})"));
  EXPECT_EQ(values(drain(*p)), repeated(20, 3));
  auto c = counters(*p);
  EXPECT_EQ(c["misses"], 20);
  EXPECT_EQ(c["hits"], 40);
  EXPECT_EQ(c["cached_elements"], 20);
  EXPECT_EQ(c["cached_bytes"], 20 * 8);
}

TEST(Cache, OnDiskTheFileAppearsOnlyWhenThePassCompleted) {
  const std::string dir = testing::temp_dir() + "/c";
  const std::string s = spec(50, path_option(dir));
  {
    auto p = build(s);
    EXPECT_EQ(drain(*p, 20).size(), 20u);
    EXPECT_EQ(files_in(dir).size(), 1u);  // the temporary file, while it fills
    EXPECT_NE(files_in(dir)[0].find(".tmp-"), std::string::npos);
  }  // interrupted: nothing may look whole
  EXPECT_TRUE(files_in(dir).empty());
  {
    auto p = build(s);
    EXPECT_EQ(values(drain(*p)), iota(50));
    EXPECT_EQ(counters(*p)["misses"], 50);
  }
  ASSERT_EQ(files_in(dir).size(), 1u);
  EXPECT_TRUE(files_in(dir)[0].starts_with("cache-") && files_in(dir)[0].ends_with(".decache"));
  auto again = build(s);  // another pipeline (another run): reads the file from its first pass
  EXPECT_EQ(values(drain(*again)), iota(50));
  EXPECT_EQ(counters(*again)["hits"], 50);
  EXPECT_EQ(counters(*again)["misses"], 0);
}

TEST(Cache, AChangedSpecOrSourceFileGetsANewKey) {
  const std::string dir = testing::temp_dir() + "/k";
  drain(*build(spec(10, path_option(dir))));
  drain(*build(spec(10, path_option(dir), "", R"({"op": "take", "count": 5}, )")));
  EXPECT_EQ(values(drain(*build(spec(11, path_option(dir))))), iota(11));
  EXPECT_EQ(files_in(dir).size(), 3u);
  // A source file rewritten in place (same path, other bytes): the key follows its size and time.
  const std::string src = testing::temp_dir() + "/lines.idx";
  auto write_idx = [&](int n) {
    std::ofstream f(src, std::ios::binary);
    // IDX images [n, 1, 1]
    const unsigned char head[] = {0, 0, 8, 3, 0, 0, 0, static_cast<unsigned char>(n),
                                  0, 0, 0, 1, 0, 0, 0, 1};
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    for (int i = 0; i < n; ++i) f.put(static_cast<char>(i));
  };
  const std::string d2 = testing::temp_dir() + "/k2";
  const std::string idx = R"({"source": {"kind": "idx", "images": ")" + src +
                          R"("}, "stages": [{"op": "cache", "path": ")" + d2 + R"("}]})";
  write_idx(4);
  EXPECT_EQ(drain(*build(idx)).size(), 4u);
  write_idx(6);
  EXPECT_EQ(drain(*build(idx)).size(), 6u);  // not the stale 4
  EXPECT_EQ(files_in(d2).size(), 2u);
}

TEST(Cache, AfterAShuffleIsRefusedUnlessAllowed) {
  const std::string shuffled = R"({"op": "shuffle", "buffer": 8}, )";
  EXPECT_NE(error_of([&] { build(spec(10, "", "", shuffled)); })
                .find("$.stages[1]: a cache after the shuffle at $.stages[0] replays the first "
                      "pass's order every epoch: put the shuffle after the cache"),
            std::string::npos);
  EXPECT_EQ(drain(*build(spec(10, R"(, "allow_shuffled": true)", "", shuffled))).size(), 10u);
}

TEST(Cache, ASourceWithoutFingerprintNeedsAKeyOnDisk) {
  const std::string dir = testing::temp_dir() + "/nokey";
  auto d = PipelineDef::from_dataset(make_range({.count = 5}), "made in code");
  d.cache({.path = dir});
  EXPECT_NE(error_of([&] { d.build(); }).find("$.stages[0].key"), std::string::npos);
  auto keyed = PipelineDef::from_dataset(make_range({.count = 5}), "made in code");
  keyed.cache({.path = dir, .key = "range-5"});
  EXPECT_EQ(drain(*keyed.build()).size(), 5u);
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"cache-range-5.decache"});
}

TEST(Cache, TheMemoryBoundFailsClearlyOrKeepsThePrefix) {
  const std::string msg = error_of([&] { drain(*build(spec(100, R"(, "max_bytes": 400)"))); });
  EXPECT_NE(msg.find("do not fit in the memory cache: 408 bytes of tensors after 51 elements, "
                     "over max_bytes = 400"),
            std::string::npos)
      << msg;
  auto p = build(
      spec(100, R"(, "max_bytes": 400, "on_full": "prefix")", R"(, {"op": "repeat", "count": 3})"));
  EXPECT_EQ(values(drain(*p)), repeated(100, 3));
  auto c = counters(*p);
  EXPECT_EQ(c["hits"], 2 * 51);
  EXPECT_EQ(c["misses"], 100 + 2 * 49);
}

TEST(Cache, SaveRestoreContinuesIdenticallyInEveryMode) {
  // A random stage upstream (fractional echo): a refilled memory cache must hold the
  // same elements as the first pass did.
  const std::string echo = R"({"op": "echo", "factor": 1.5}, )";
  const std::string rep = R"(, {"op": "repeat", "count": 3})";
  testing::expect_save_restore_identical(spec(30, "", rep, echo), {0, 7, 30, 52, 80});
  testing::expect_save_restore_identical(
      spec(30, R"(, "max_bytes": 120, "on_full": "prefix")", rep, echo), {5, 40, 70});
  const std::string dir = testing::temp_dir() + "/sr";
  testing::expect_save_restore_identical(spec(30, path_option(dir), rep, echo), {3, 33, 70});
}

TEST(Cache, ARestoreIntoAFillingPassFillsOnTheNextPass) {
  const std::string dir = testing::temp_dir() + "/mid";
  const std::string s = spec(40, path_option(dir), R"(, {"op": "repeat", "count": 2})");
  std::string state;
  {
    auto p = build(s);
    EXPECT_EQ(values(drain(*p, 10)), iota(10));
    state = p->save();
  }
  EXPECT_TRUE(files_in(dir).empty());
  auto p = build(s);
  p->restore(state);
  const std::vector<int64_t> all = repeated(40, 2);
  EXPECT_EQ(values(drain(*p)), std::vector<int64_t>(all.begin() + 10, all.end()));
  EXPECT_EQ(files_in(dir).size(), 1u);  // filled by the second pass
}

TEST(Cache, ADamagedFileIsADataErrorNamingFileAndRecord) {
  const std::string dir = testing::temp_dir() + "/bad";
  const std::string s = spec(20, path_option(dir));
  drain(*build(s));
  ASSERT_EQ(files_in(dir).size(), 1u);
  const std::string file = dir + "/" + files_in(dir)[0];
  fs::resize_file(file, fs::file_size(file) - 30);
  const std::string msg = error_of([&] { drain(*build(s)); });
  EXPECT_NE(msg.find(file + ": the cache file is truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("record 1"), std::string::npos) << msg;
}

TEST(Cache, TwoPipelinesFillingOneFolderAtOnceLeaveOneWholeFile) {
  const std::string dir = testing::temp_dir() + "/two";
  const std::string s = spec(2000, path_option(dir));
  std::vector<int64_t> a, b;
  std::thread t([&] { a = values(drain(*build(s))); });
  b = values(drain(*build(s)));
  t.join();
  EXPECT_EQ(a, iota(2000));
  EXPECT_EQ(b, iota(2000));
  ASSERT_EQ(files_in(dir).size(), 1u);
  EXPECT_EQ(values(drain(*build(s))), iota(2000));
}

}  // namespace
}  // namespace dataecho
