// Text through the whole sequence path, as a JSON spec: text -> tokenize -> pack or
// bucket, with echo; the same at every thread count, and restored mid-block and
// mid-bucket.
#include <fstream>

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// Three files of lines of 0 to 60 characters, ~400 lines in all.
std::vector<std::string> corpus(const std::string& dir) {
  std::vector<std::string> files;
  uint64_t x = 12345;
  for (int f = 0; f < 3; ++f) {
    files.push_back(dir + "/part-" + std::to_string(f) + ".txt");
    std::ofstream out(files.back());
    for (int i = 0; i < 130 + f; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const size_t len = (x >> 33) % 61;
      for (size_t j = 0; j < len; ++j) out << static_cast<char>('a' + (x >> (j % 40)) % 26);
      out << "\n";
    }
  }
  return files;
}

std::string spec(const std::vector<std::string>& files, int threads, const nlohmann::json& tail,
                 bool echo = true) {
  nlohmann::json stages =
      nlohmann::json::array({{{"op", "interleave"}, {"cycle", 2}, {"parallelism", threads}},
                             {{"op", "map"}, {"fn", "tokenize"}, {"parallelism", threads}}});
  if (echo) stages.push_back({{"op", "echo"}, {"factor", 1.5}});
  for (const auto& s : tail) stages.push_back(s);
  if (threads > 1) stages.push_back({{"op", "prefetch"}, {"buffer", 3}});
  return nlohmann::json{
      {"seed", 7}, {"source", {{"kind", "text"}, {"uri", files}}}, {"stages", stages}}
      .dump();
}

std::vector<std::string> dump(const std::vector<Example>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(example_to_json(e, true).dump());
  return out;
}

const nlohmann::json kPack = nlohmann::json::array(
    {{{"op", "pack"}, {"length", 64}},
     {{"op", "echo"}, {"factor", 2}},
     {{"op", "shuffle"}, {"buffer", 8}},
     {{"op", "padded_batch"}, {"size", 4}, {"fields", {{"ids", {{"value", -1}}}}}}});
const nlohmann::json kBucket = nlohmann::json::array(
    {{{"op", "bucket"}, {"boundaries", {16, 32, 48}}, {"batch_sizes", {8, 6, 4, 3}}}});

TEST(Sequences, SameAtEveryThreadCount) {
  const auto files = corpus(temp_dir());
  for (const auto& tail : {kPack, kBucket}) {
    const auto one = dump(run(spec(files, 1, tail)));
    EXPECT_GT(one.size(), 20u);
    EXPECT_EQ(dump(run(spec(files, 3, tail))), one) << tail.dump();
  }
}

TEST(Sequences, PackedBlocksHoldEveryTokenOnce) {
  const auto files = corpus(temp_dir());
  nlohmann::json tail = nlohmann::json::array({{{"op", "pack"}, {"length", 32}}});
  auto blocks = run(spec(files, 1, tail, false));
  int64_t bytes = 0, empty_lines = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) {
      bytes += static_cast<int64_t>(line.size()) + 1;
      empty_lines += line.empty();
    }
  }
  int64_t tokens = 0;
  for (const Example& b : blocks) {
    const Tensor& doc = b.get("document");
    for (int64_t i = 0; i < doc.num_elements(); ++i) tokens += doc.data<int32_t>()[i] >= 0;
  }
  // Each non-empty line: its bytes plus one eos in place of its newline.
  EXPECT_EQ(tokens, bytes - empty_lines);
  EXPECT_EQ(blocks.size(), static_cast<size_t>((tokens + 31) / 32));
}

TEST(Sequences, RestoredMidBlockAndMidBucket) {
  const auto files = corpus(temp_dir());
  expect_save_restore_identical(spec(files, 2, kPack), {1, 9, 30});
  expect_save_restore_identical(spec(files, 2, kBucket), {1, 7, 40});
}

}  // namespace
}  // namespace dataecho::testing
