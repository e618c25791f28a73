// advise_echo on made-up stats: the factor follows R up to the largest one the committed
// experiments show to pay, and beyond it the advice says echo alone cannot close the gap.
#include "dataecho/spec/echo_advice.h"

#include <gtest/gtest.h>

namespace dataecho {
namespace {

// A source and one map over `batches` batches: the map is the slowest stage, busy
// `map_ms_per_batch` per batch on one thread.
nlohmann::json stats(double map_ms_per_batch, int64_t batches) {
  auto node = [&](const char* name, double busy_ms) {
    return nlohmann::json{{"name", name},
                          {"elements", batches * 10},
                          {"busy_ms", busy_ms},
                          {"wait_input_ms", 0.0},
                          {"wait_output_ms", 0.0}};
  };
  return nlohmann::json::array(
      {node("0:range", 0.01 * static_cast<double>(batches)),
       node("1:map(sleep)", map_ms_per_batch * static_cast<double>(batches))});
}

const nlohmann::json kSpec = nlohmann::json::parse(
    R"({"source":{"kind":"range","n":1000},"stages":[{"op":"map","fn":"sleep","args":{"ms":1}},
       {"op":"batch","size":10}]})");

TEST(EchoAdvice, TheFactorFollowsRUpToTheLargestShownToPay) {
  const EchoAdvice a = advise_echo(stats(4.2, 100), kSpec, 100, 4.2, 1.0);
  EXPECT_NEAR(a.r, 4.2, 1e-9);
  EXPECT_DOUBLE_EQ(a.recommended_factor, 4.2);
  EXPECT_FALSE(a.factor_capped);
  EXPECT_NE(a.recommendations.back().find("echo with a factor of 4.2"), std::string::npos)
      << a.recommendations.back();
  EXPECT_NE(a.placement.find("\"max_factor\":5}"), std::string::npos) << a.placement;
}

TEST(EchoAdvice, BeyondItEchoAloneCannotCloseTheGap) {
  // A 2 ms sleep stage against a step of under 10 us: R = 240.
  const EchoAdvice a = advise_echo(stats(2.0, 100), kSpec, 100, 2.0, 2.0 / 240);
  EXPECT_NEAR(a.r, 240, 1e-6);
  EXPECT_DOUBLE_EQ(a.recommended_factor, kLargestFactorShown);
  EXPECT_TRUE(a.factor_capped);
  // The pipeline's own fixes come first; the last line says why echo is not enough.
  ASSERT_GE(a.recommendations.size(), 2u);
  EXPECT_NE(a.recommendations.front().find("raise \"parallelism\""), std::string::npos)
      << a.recommendations.front();
  const std::string& last = a.recommendations.back();
  EXPECT_NE(last.find("echo alone cannot close this gap"), std::string::npos) << last;
  EXPECT_NE(last.find("docs/results.md"), std::string::npos) << last;
  EXPECT_NE(last.find("at most 6"), std::string::npos) << last;
  EXPECT_NE(a.placement.find("\"max_factor\":6}"), std::string::npos) << a.placement;
  // The recommended spec echoes by the capped factor.
  EXPECT_EQ(a.recommended_spec["stages"][1]["factor"].get<double>(), kLargestFactorShown);
}

TEST(EchoAdvice, NoEchoWhenThePipelineKeepsUp) {
  const EchoAdvice a = advise_echo(stats(1.0, 100), kSpec, 100, 1.0, 1.0);
  EXPECT_DOUBLE_EQ(a.recommended_factor, 1);
  EXPECT_FALSE(a.factor_capped);
}

}  // namespace
}  // namespace dataecho
