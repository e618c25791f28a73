// The `sample` source: pipelines mixed by weight, proportions within their binomial
// interval, the stop rules, determinism by seed, save/restore, echo inside one input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho {
namespace {

using nlohmann::json;

// Input 0: values 0..n0-1; input 1: values 1000..1000+n1-1.
json two_inputs(int64_t n0, int64_t n1, json stages0 = json::array()) {
  return json::array({{{"source", {{"kind", "range"}, {"count", n0}}}, {"stages", stages0}},
                      {{"source", {{"kind", "range"}, {"count", 1000 + n1}}},
                       {"stages", {{{"op", "skip"}, {"count", 1000}}}}}});
}

std::string spec(json inputs, json extra = json::object(), json stages = json::array()) {
  json source = {{"kind", "sample"}, {"inputs", std::move(inputs)}};
  source.update(extra);
  return json{{"seed", 11}, {"source", source}, {"stages", stages}}.dump();
}

int64_t counter(Pipeline& p, const std::string& name) {
  auto c = p.stats().nodes()[0]->counters();
  return c.count(name) ? c.at(name) : 0;
}

TEST(Sample, ProportionsFollowTheWeights) {
  const int64_t n = 20000;
  for (double w0 : {0.7, 0.1}) {
    auto p = testing::build(spec(two_inputs(1 << 20, 1 << 20),
                                 {{"weights", {w0, 1 - w0}}, {"stop", "first"}},
                                 {{{"op", "take"}, {"count", n}}}));
    auto out = testing::drain(*p);
    ASSERT_EQ(static_cast<int64_t>(out.size()), n);
    const int64_t k = counter(*p, "from_input_0");
    EXPECT_EQ(k + counter(*p, "from_input_1"), n);
    // Within 4.5 standard deviations of n * w0 (a seeded run: the same every time).
    const double sd = std::sqrt(n * w0 * (1 - w0));
    EXPECT_LT(std::abs(static_cast<double>(k) - n * w0), 4.5 * sd) << w0 << " " << k;
  }
}

TEST(Sample, StopRules) {
  auto first = testing::build(spec(two_inputs(10, 1000), {{"stop", "first"}}));
  auto f = testing::drain(*first);
  EXPECT_EQ(counter(*first, "from_input_0"), 10);
  EXPECT_LT(f.size(), 1010u);
  auto all = testing::run(spec(two_inputs(10, 1000), {{"stop", "all"}}));
  EXPECT_EQ(all.size(), 1010u);
  auto never = testing::build(
      spec(two_inputs(10, 20), {{"stop", "never"}}, {{{"op", "take"}, {"count", 3000}}}));
  auto v = testing::values(testing::drain(*never));
  ASSERT_EQ(v.size(), 3000u);
  EXPECT_GT(counter(*never, "from_input_0"), 1300);
  // Input 0 restarted epoch after epoch: its values alike often, give or take the last.
  EXPECT_LE(std::abs(std::count(v.begin(), v.end(), 3) - std::count(v.begin(), v.end(), 7)), 1);
  std::string e = testing::error_of([&] {
    testing::run(spec(two_inputs(0, 5), {{"stop", "never"}}, {{{"op", "take"}, {"count", 9}}}));
  });
  EXPECT_NE(e.find("input 0 is empty"), std::string::npos) << e;
}

TEST(Sample, TheSeedDecidesTheMixture) {
  auto a = testing::values(testing::run(spec(two_inputs(100, 100))));
  EXPECT_EQ(a, testing::values(testing::run(spec(two_inputs(100, 100)))));
  EXPECT_NE(a, testing::values(testing::run(spec(two_inputs(100, 100), {{"seed", 5}}))));
}

TEST(Sample, SaveRestoreContinuesIdentically) {
  const json shuffled = {{{"op", "shuffle"}, {"buffer", 16}}};
  testing::expect_save_restore_identical(spec(two_inputs(30, 50, shuffled), {{"weights", {2, 1}}}),
                                         {0, 7, 29, 60, 79});
  testing::expect_save_restore_identical(
      spec(two_inputs(13, 9, shuffled), {{"stop", "never"}}, {{{"op", "take"}, {"count", 90}}}),
      {5, 40, 89});
}

TEST(Sample, EchoInsideOneInputEchoesThatInputOnly) {
  auto out = testing::run(spec(two_inputs(50, 50, {{{"op", "echo"}, {"factor", 2}}})));
  ASSERT_EQ(out.size(), 150u);
  for (const auto& e : out) {
    const int64_t v = e.get("value").item<int64_t>();
    if (v >= 1000) {
      EXPECT_EQ(e.echo(), 0) << v;
    }
  }
  auto echoes = testing::echoes(out);
  EXPECT_EQ(std::count(echoes.begin(), echoes.end(), 1), 50);
}

TEST(Sample, ErrorsNameTheInputAndTheCppBuilderWritesTheSpec) {
  std::string e = testing::error_of([&] {
    testing::build(spec(two_inputs(5, 5, {{{"op", "batch"}, {"size", 0}}})));
  });
  EXPECT_NE(e.find("$.source.inputs[0].stages[0].size"), std::string::npos) << e;
  e = testing::error_of([&] { testing::build(spec(two_inputs(5, 5), {{"weights", {1}}})); });
  EXPECT_NE(e.find("$.source.weights"), std::string::npos) << e;
  e = testing::error_of([&] {
    testing::build(spec(json::array({{{"kind", "range"}, {"count", -1}}})));
  });
  EXPECT_NE(e.find("$.source.inputs[0].count"), std::string::npos) << e;
  PipelineDef d = sample({range(3), range(4).take(2)}, {1, 3}, {{"stop", "all"}});
  EXPECT_EQ(PipelineDef::from_json(d.to_json()), d);
  EXPECT_EQ(testing::drain(*d.build()).size(), 5u);
}

}  // namespace
}  // namespace dataecho
