// The `echo` stage in a JSON spec: good specs build, bad ones are refused with the
// JSON path of the offending field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "dataecho/spec/build.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::build;
using testing::error_of;

std::string with_echo(const std::string& echo_stage) {
  return R"({"seed": 3, "source": {"kind": "range", "count": 10}, "stages": [{"op": "map", "fn": "identity"}, )" +
         echo_stage + "]}";
}

std::string spec_error(const std::string& echo_stage) {
  return error_of([&] { build(with_echo(echo_stage)); });
}

TEST(EchoSpec, GoodSpecsBuildAndRun) {
  EXPECT_EQ(testing::run(with_echo(R"({"op": "echo", "factor": 2})")).size(), 20u);
  EXPECT_EQ(testing::run(with_echo(R"({"op": "echo", "factor": 1})")).size(), 10u);
  auto p =
      build(with_echo(R"({"op": "echo", "factor": "adaptive", "max_factor": 6, "buffer": 3})"));
  EXPECT_EQ(p->nodes().back()->op_name(), "echo(adaptive)");
  std::vector<int64_t> fresh;
  while (auto e = p->next())
    if (e->echo() == 0) fresh.push_back(e->id());
  EXPECT_EQ(fresh, testing::iota(10));
  // The default max_factor, and an explicit seed.
  EXPECT_NO_THROW(build(with_echo(R"({"op": "echo", "factor": "adaptive"})")));
  EXPECT_NO_THROW(build(with_echo(R"({"op": "echo", "factor": 2.5, "seed": 11})")));
}

TEST(EchoSpec, FactorBelowOneIsRefusedWithItsPath) {
  std::string err = spec_error(R"({"op": "echo", "factor": 0.5})");
  EXPECT_NE(err.find("$.stages[1].factor"), std::string::npos) << err;
  EXPECT_NE(err.find("[1, 1000000]"), std::string::npos) << err;
  EXPECT_NE(spec_error(R"({"op": "echo", "factor": -3})").find("$.stages[1].factor"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"op": "echo", "factor": 1e9})").find("$.stages[1].factor"),
            std::string::npos);
}

TEST(EchoSpec, NanAndNonNumbersAreRefused) {
  // JSON text cannot spell NaN, but a spec built in code can hold one.
  nlohmann::json spec = nlohmann::json::parse(with_echo(R"({"op": "echo", "factor": 2})"));
  spec["stages"][1]["factor"] = std::nan("");
  std::string err = error_of([&] { build_pipeline(spec); });
  EXPECT_NE(err.find("$.stages[1].factor"), std::string::npos) << err;
  for (const char* bad : {R"("NaN")", "true", "[2]", "null", R"({"x": 1})"}) {
    err = spec_error(std::string(R"({"op": "echo", "factor": )") + bad + "}");
    EXPECT_NE(err.find("$.stages[1].factor"), std::string::npos) << bad << ": " << err;
  }
  err = spec_error(R"({"op": "echo"})");
  EXPECT_NE(err.find("$.stages[1].factor: missing"), std::string::npos) << err;
}

TEST(EchoSpec, UnknownModeIsRefused) {
  std::string err = spec_error(R"({"op": "echo", "factor": "sometimes"})");
  EXPECT_NE(err.find("$.stages[1].factor"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown echo mode \"sometimes\""), std::string::npos) << err;
  EXPECT_NE(err.find("\"adaptive\""), std::string::npos) << err;
}

TEST(EchoSpec, BadMaxFactorIsRefused) {
  std::string err = spec_error(R"({"op": "echo", "factor": "adaptive", "max_factor": 0.5})");
  EXPECT_NE(err.find("$.stages[1].max_factor"), std::string::npos) << err;
  err = spec_error(R"({"op": "echo", "factor": "adaptive", "max_factor": "lots"})");
  EXPECT_NE(err.find("$.stages[1].max_factor"), std::string::npos) << err;
  err = spec_error(R"({"op": "echo", "factor": "adaptive", "buffer": 0})");
  EXPECT_NE(err.find("$.stages[1].buffer"), std::string::npos) << err;
}

TEST(EchoSpec, AdaptiveOnlyOptionsWithANumericFactorAreRefused) {
  std::string err = spec_error(R"({"op": "echo", "factor": 2, "max_factor": 4})");
  EXPECT_NE(err.find("$.stages[1].max_factor"), std::string::npos) << err;
  EXPECT_NE(err.find("adaptive"), std::string::npos) << err;
  err = spec_error(R"({"op": "echo", "factor": 2, "buffer": 4})");
  EXPECT_NE(err.find("$.stages[1].buffer"), std::string::npos) << err;
}

TEST(EchoSpec, UnknownFieldsAreRefused) {
  std::string err = spec_error(R"({"op": "echo", "factor": 2, "factr": 3})");
  EXPECT_NE(err.find("$.stages[1].factr: unknown field"), std::string::npos) << err;
}

}  // namespace
}  // namespace dataecho

namespace dataecho {
namespace {

TEST(EchoSpec, ExampleSpecsBuildAndRun) {
  int found = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(DATAECHO_SOURCE_DIR) + "/examples")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("echo_", 0) != 0 || entry.path().extension() != ".json") continue;
    SCOPED_TRACE(name);
    ++found;
    auto p = build_pipeline_from_file(entry.path().string());
    bool echoed = false;
    for (int i = 0; i < 12; ++i) {
      auto e = p->next();
      ASSERT_TRUE(e.has_value());
      echoed |= e->fresh_rows() < e->num_rows();
    }
    bool has_echo_node = false;
    for (const auto& n : p->nodes()) has_echo_node |= n->op_name().rfind("echo", 0) == 0;
    EXPECT_TRUE(has_echo_node);
    if (name.find("adaptive") == std::string::npos && name.find("slow") == std::string::npos) {
      EXPECT_TRUE(echoed) << "a fixed echo repeats within a dozen elements";
    }
  }
  EXPECT_GE(found, 5);
}

}  // namespace
}  // namespace dataecho
