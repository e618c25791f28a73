// What a tuner learned survives a rebuild of the same definition (core/tuner_memory.h), in
// real pipelines. Each pipeline's tuner runs on a ManualClock and is stepped here
// (Pipeline::tune_step()): no real window. The change it makes is the one of
// Autotune.BufferFollowsTheRamBudget: elements of 1 MiB behind a prefetch of 2 on a RAM
// budget of 1.5 MiB, so the first window lowers the buffer to 1. A rebuilt pipeline
// starts there; one built with "remember": false, or after clear_tuner_memory(), or of
// another definition starts at 2. The saved state (v3) carries the memo; v2 states still
// restore. The rules a resumed tuner goes on with are tested on made-up windows in
// tests/core/tuner_test.cc (TunerRemembers.*).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "dataecho/core/clock.h"
#include "dataecho/core/state.h"
#include "dataecho/core/tuner.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// `size`: the noise's floats (262144: 1 MiB); `extra`: more top-level fields.
std::string spec(int64_t size = 262144, const std::string& extra = "") {
  return R"({"source": {"kind": "range", "count": 100000000}, "seed": 3, )" + extra +
         R"("stages": [{"op": "map", "fn": "random_noise", "args": {"size": )" +
         std::to_string(size) + R"(}}, {"op": "prefetch", "buffer": "auto"}]})";
}

// A pipeline whose tuner is stepped on a clock of its own, remembering into `memory`
// (null: the process's).
struct Stepped {
  Stepped(const std::string& text, std::shared_ptr<TunerMemory> memory) {
    BuildOptions b;
    b.tuning.clock = clock;
    b.tuning.ram_budget_bytes = 1536 * 1024;
    b.tuning.memory = std::move(memory);
    p = PipelineDef::from_json(nlohmann::json::parse(text)).build(b);
  }
  int64_t buffer() const { return p->tuning().at("knobs").at(0).at("value").get<int64_t>(); }
  // Pulls 3 elements and steps one window of 0.1 s: the first lowers the buffer to 1.
  std::optional<TunerChange> window() {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(p->next().has_value());
    clock->advance_seconds(0.1);
    return p->tune_step();
  }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<Pipeline> p;
};

// Runs a pipeline of `text` until its tuner has lowered the buffer, and destroys it.
void learn(const std::string& text, const std::shared_ptr<TunerMemory>& memory) {
  Stepped a(text, memory);
  EXPECT_EQ(a.buffer(), 2);
  const auto c = a.window();
  ASSERT_TRUE(c) << a.p->tuning().dump();
  EXPECT_EQ(c->rule, TunerChange::Rule::kRamBudget);
  EXPECT_EQ(a.buffer(), 1);
}

TEST(AutotuneMemory, ARebuiltPipelineStartsFromTheRememberedValues) {
  auto memory = std::make_shared<TunerMemory>();
  learn(spec(), memory);
  ASSERT_EQ(memory->size(), 1u);
  Stepped b(spec(), memory);
  EXPECT_EQ(b.buffer(), 1);
  const nlohmann::json t = b.p->tuning();
  EXPECT_TRUE(t.at("remember").get<bool>());
  EXPECT_TRUE(t.at("resumed").get<bool>());
  EXPECT_EQ(t.at("resumed_from"), "memory");
  EXPECT_GE(t.at("elapsed_s").get<double>(), 0.1);
  EXPECT_TRUE(t.at("changes").empty());
  EXPECT_EQ(b.p->stats().to_json()[2]["values"]["buffer"].get<double>(), 1);
  // Nothing more to lower: within the budget at 1.
  EXPECT_FALSE(b.window()) << b.p->tuning().dump();
  // The output is the definition's, whatever the setting.
  EXPECT_EQ(ids(drain(*b.p, 5)), (std::vector<int64_t>{3, 4, 5, 6, 7}));
}

TEST(AutotuneMemory, SeedsAndBudgetsShareAnEntryOtherDefinitionsDoNot) {
  auto memory = std::make_shared<TunerMemory>();
  learn(spec(), memory);
  // Another seed and other budgets: the same entry.
  std::string other_seed = spec(262144, R"("autotune": {"cpu_budget": 1}, )");
  other_seed.replace(other_seed.find("\"seed\": 3"), 9, "\"seed\": 8");
  Stepped same(other_seed, memory);
  EXPECT_EQ(same.buffer(), 1);
  EXPECT_TRUE(same.p->tuning().at("resumed").get<bool>());
  // Other elements: another definition, tuned from its own start.
  Stepped other(spec(131072), memory);
  EXPECT_EQ(other.buffer(), 2);
  EXPECT_FALSE(other.p->tuning().at("resumed").get<bool>());
  EXPECT_TRUE(other.p->tuning().at("resumed_from").is_null());
}

TEST(AutotuneMemory, RememberFalseStartsFreshAndStoresNothing) {
  auto memory = std::make_shared<TunerMemory>();
  const std::string forgetful = spec(262144, R"("autotune": {"remember": false}, )");
  EXPECT_EQ(PipelineDef::from_json(nlohmann::json::parse(forgetful)).to_json()["autotune"],
            nlohmann::json({{"remember", false}}));
  learn(forgetful, memory);
  EXPECT_EQ(memory->size(), 0u);
  learn(spec(), memory);
  const int64_t windows =
      memory->find(PipelineDef::from_json(nlohmann::json::parse(spec())).tuner_memory_key())
          ->windows;
  {
    Stepped b(forgetful, memory);  // the same definition, but it does not remember
    EXPECT_EQ(b.buffer(), 2);
    const nlohmann::json t = b.p->tuning();
    EXPECT_FALSE(t.at("remember").get<bool>());
    EXPECT_FALSE(t.at("resumed").get<bool>());
    ASSERT_TRUE(b.window());
  }
  EXPECT_EQ(memory->find(PipelineDef::from_json(nlohmann::json::parse(spec())).tuner_memory_key())
                ->windows,
            windows)
      << "a pipeline that does not remember stored its memo";
  // The C++ builder's switch.
  PipelineDef d = PipelineDef::from_json(nlohmann::json::parse(spec()));
  d.autotune({.remember = false});
  EXPECT_EQ(d.to_json()["autotune"], nlohmann::json({{"remember", false}}));
  EXPECT_FALSE(d.build()->tuning().at("remember").get<bool>());
}

TEST(AutotuneMemory, ClearTunerMemoryForgetsWhatTheProcessLearned) {
  clear_tuner_memory();
  learn(spec(), nullptr);  // the process's memory
  EXPECT_GE(TunerMemory::global()->size(), 1u);
  {
    Stepped b(spec(), nullptr);
    EXPECT_EQ(b.buffer(), 1);
  }
  clear_tuner_memory();
  EXPECT_EQ(TunerMemory::global()->size(), 0u);
  Stepped c(spec(), nullptr);
  EXPECT_EQ(c.buffer(), 2);
  EXPECT_FALSE(c.p->tuning().at("resumed").get<bool>());
}

TEST(AutotuneMemory, TheSavedStateCarriesTheMemoAndARestoredPipelineGoesOnFromIt) {
  auto memory = std::make_shared<TunerMemory>();
  Stepped a(spec(), memory);
  ASSERT_TRUE(a.window());
  const std::string state = a.p->save();
  EXPECT_NE(state.find("dataecho-pipeline-state-v3"), std::string::npos);
  EXPECT_NE(state.find("\"param\":\"buffer\""), std::string::npos);
  const std::vector<int64_t> next = ids(drain(*a.p, 4));

  // A pipeline with nothing in its memory: the state's memo sets the buffer.
  Stepped b(spec(), std::make_shared<TunerMemory>());
  EXPECT_EQ(b.buffer(), 2);
  b.p->restore(state);
  EXPECT_EQ(b.buffer(), 1);
  const nlohmann::json t = b.p->tuning();
  EXPECT_EQ(t.at("resumed_from"), "state");
  EXPECT_GE(t.at("elapsed_s").get<double>(), 0.1);
  EXPECT_EQ(ids(drain(*b.p, 4)), next);
  // Saved again, the memo goes on.
  Stepped c(spec(), std::make_shared<TunerMemory>());
  c.p->restore(b.p->save());
  EXPECT_EQ(c.buffer(), 1);

  // Built with "remember": false, the memo is ignored; the elements are the same.
  Stepped d(spec(262144, R"("autotune": {"remember": false}, )"), std::make_shared<TunerMemory>());
  d.p->restore(state);
  EXPECT_EQ(d.buffer(), 2);
  EXPECT_FALSE(d.p->tuning().at("resumed").get<bool>());
  EXPECT_EQ(ids(drain(*d.p, 4)), next);
}

// A state of format v2 (before the memo): the v3 layout without the memo's string, made
// here from a v3 state (tag, fingerprint, elements returned, memo, the nodes' states).
std::string as_v2(const std::string& v3) {
  StateReader r(v3);
  const std::string tag = r.read_string();
  EXPECT_EQ(tag, "dataecho-pipeline-state-v3");
  const std::string fingerprint = r.read_string();
  const int64_t returned = r.read_i64();
  const std::string memo = r.read_string();
  StateWriter head;
  head.begin(tag);
  head.write_string(fingerprint);
  head.write_i64(returned);
  head.write_string(memo);
  EXPECT_EQ(v3.compare(0, head.data().size(), head.data()), 0);
  StateWriter v2;
  v2.begin("dataecho-pipeline-state-v2");
  v2.write_string(fingerprint);
  v2.write_i64(returned);
  return v2.take() + v3.substr(head.data().size());
}

TEST(AutotuneMemory, AStateOfFormatV2StillRestoresWithoutAMemo) {
  auto memory = std::make_shared<TunerMemory>();
  Stepped a(spec(), memory);
  ASSERT_TRUE(a.window());
  const std::string v2 = as_v2(a.p->save());
  const std::vector<int64_t> next = ids(drain(*a.p, 4));
  Stepped b(spec(), std::make_shared<TunerMemory>());
  b.p->restore(v2);
  EXPECT_EQ(b.buffer(), 2);  // nothing to go on from: the tuner starts where it is
  EXPECT_FALSE(b.p->tuning().at("resumed").get<bool>());
  EXPECT_EQ(b.p->elements_returned(), 3);
  EXPECT_EQ(ids(drain(*b.p, 4)), next);
}

TEST(AutotuneMemory, ABrokenMemoInAStateIsDataLossNamingIt) {
  Stepped a(spec(), std::make_shared<TunerMemory>());
  ASSERT_TRUE(a.window());
  std::string state = a.p->save();
  const size_t at = state.find("\"version\":1");
  ASSERT_NE(at, std::string::npos);
  state.replace(at, 11, "\"version\":7");
  Stepped b(spec(), std::make_shared<TunerMemory>());
  const std::string error = error_of([&] { b.p->restore(state); });
  EXPECT_NE(error.find("the saved state's tuner memo cannot be read"), std::string::npos) << error;
  EXPECT_NE(error.find("version 7"), std::string::npos) << error;
}

}  // namespace
}  // namespace dataecho::testing
