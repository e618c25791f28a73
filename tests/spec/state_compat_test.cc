// Saved pipeline state stays readable: a state file written by the previous release
// (format v1, tests/fixtures/state_v1.bin: `dataecho pipe state_v1_spec.json --limit 3
// --save-state`, whose fingerprint was std::hash of the spec's JSON) restores and goes on
// with exactly the elements a fresh run gives after its first 3; today's states (v3: v2's
// fixed hash of the canonical spec, and the tuner's memo) restore; another format or
// another spec is refused with a message that says which. (A v2 state restoring:
// AutotuneMemory.AStateOfFormatV2StillRestoresWithoutAMemo in tests/ops.) The elastic
// state's format ("dataecho-elastic/1") is frozen the same way: two ranks' states
// (tests/fixtures/elastic_state_v1_rank{0,1}.bin: `dataecho pipe elastic_state_v1_spec.json
// --lanes 6 --world-size 2 --rank R --limit 3 --save-state`), merged, restore on one rank and on
// three with exactly the elements they gave when the format was fixed
// (elastic_state_v1_rest_{1,3}.jsonl: `--values --lanes 6 --world-size W --rank R --restore-state`
// of both).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/dataecho.h"
#include "dataecho/ops/elastic.h"
#include "test_util.h"

namespace dataecho {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(DATAECHO_SOURCE_DIR) + "/tests/fixtures/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> fixture_lines(const std::string& name) {
  std::istringstream in(fixture(name));
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l).dump());
  return out;
}

std::vector<std::string> lines(Pipeline& p) {
  std::vector<std::string> out;
  for (const auto& e : testing::drain(p)) out.push_back(example_to_json(e, true).dump());
  return out;
}

// Each element with its values, keys sorted as fixture_lines sorts them.
std::vector<std::string> sorted_lines(Pipeline& p) {
  std::vector<std::string> out;
  for (const auto& e : testing::drain(p))
    out.push_back(nlohmann::json(example_to_json(e, true)).dump());
  return out;
}

PipelineDef fixture_def() {
  return PipelineDef::from_json(parse_spec_text(fixture("state_v1_spec.json"), "fixture"));
}

TEST(StateCompat, StateOfThePreviousReleaseRestores) {
  const std::string v1 = fixture("state_v1.bin");
  ASSERT_FALSE(v1.empty());
  ASSERT_NE(v1.find("dataecho-pipeline-state-v1"), std::string::npos);
  auto full = lines(*fixture_def().build());
  auto p = fixture_def().build();
  p->restore(v1);
  EXPECT_EQ(lines(*p), std::vector<std::string>(full.begin() + 3, full.end()));
  // ... and what the previous release printed after restoring it.
  const std::vector<std::string> want = fixture_lines("state_v1_rest.jsonl");
  auto q = fixture_def().build();
  q->restore(v1);
  EXPECT_EQ(sorted_lines(*q), want);
}

TEST(StateCompat, TodaysStateRestoresAndOthersAreRefusedSayingWhy) {
  auto p = fixture_def().build();
  testing::drain(*p, 3);
  const std::string v3 = p->save();
  EXPECT_NE(v3.find("dataecho-pipeline-state-v3"), std::string::npos);
  EXPECT_NE(v3.find("fnv1a64:"), std::string::npos);
  auto q = fixture_def().build();
  q->restore(v3);
  EXPECT_EQ(testing::drain(*q).size(), 17u);

  std::string future = v3;
  future.replace(future.find("state-v3"), 8, "state-v9");
  EXPECT_NE(testing::error_of([&] {
              fixture_def().build()->restore(future);
            }).find("format 'dataecho-pipeline-state-v9'"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { fixture_def().build()->restore("garbage"); }).find("state"),
            std::string::npos);
  auto other = fixture_def().seed(6).build();
  EXPECT_NE(testing::error_of([&] { other->restore(v3); }).find("different pipeline spec"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              fixture_def().seed(6).build()->restore(fixture("state_v1.bin"));
            }).find("different pipeline spec"),
            std::string::npos);
}

TEST(StateCompat, ElasticStateOfFormat1Restores) {
  const std::vector<std::string> ranks = {fixture("elastic_state_v1_rank0.bin"),
                                          fixture("elastic_state_v1_rank1.bin")};
  ASSERT_FALSE(ranks[0].empty());
  ASSERT_FALSE(ranks[1].empty());
  ASSERT_NE(ranks[0].find("dataecho-elastic/1"), std::string::npos);
  const std::string merged = merge_elastic_states(ranks);
  const PipelineDef def =
      PipelineDef::from_json(parse_spec_text(fixture("elastic_state_v1_spec.json"), "fixture"));
  for (int64_t world : {1, 3}) {
    std::vector<std::string> got;
    for (int64_t rank = 0; rank < world; ++rank) {
      auto p = def.with_elastic_first(6, world, rank).build();
      p->restore(merged);
      const std::vector<std::string> part = sorted_lines(*p);
      got.insert(got.end(), part.begin(), part.end());
    }
    EXPECT_EQ(got, fixture_lines("elastic_state_v1_rest_" + std::to_string(world) + ".jsonl"))
        << "on " << world << " ranks";
  }
  // On one rank the rest is the uninterrupted run's, after its first 3 global batches.
  const std::vector<std::string> full = sorted_lines(*def.with_elastic_first(6, 1, 0).build());
  ASSERT_EQ(full.size(), 40u);
  EXPECT_EQ(std::vector<std::string>(full.begin() + 3, full.end()),
            fixture_lines("elastic_state_v1_rest_1.jsonl"));
}

}  // namespace
}  // namespace dataecho
