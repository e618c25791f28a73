// The CPU split (core/cpu_affinity.h): how --cpu-split divides the CPUs, and that a
// thread the engine starts runs on the engine's set. The pipeline's own threads are
// checked in tests/ops/cpu_affinity_pipeline_test.cc.
#include "dataecho/core/cpu_affinity.h"

#include <gtest/gtest.h>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

// Restores the engine's set and this thread's CPUs whatever a test does.
struct RestoreCpus {
  std::vector<int> before = allowed_cpus();
  ~RestoreCpus() {
    set_engine_cpus({});
    pin_current_thread(before);
  }
};

TEST(CpuSplit, FirstNForTheCallerTheRestForTheEngine) {
  auto [own, engine] = split_cpus({0, 1, 2, 3}, 1);
  EXPECT_EQ(own, (std::vector<int>{0}));
  EXPECT_EQ(engine, (std::vector<int>{1, 2, 3}));
  std::tie(own, engine) = split_cpus({2, 5, 7}, 2);  // the allowed set, not 0..n-1
  EXPECT_EQ(own, (std::vector<int>{2, 5}));
  EXPECT_EQ(engine, (std::vector<int>{7}));
}

TEST(CpuSplit, RefusesASplitThatLeavesASideEmpty) {
  for (int n : {0, 2, 3, -1}) {
    SCOPED_TRACE(n);
    try {
      split_cpus({0, 1}, n);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      std::string msg = e.what();
      EXPECT_NE(msg.find("--cpu-split " + std::to_string(n)), std::string::npos) << msg;
      EXPECT_NE(msg.find("between 1 and 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("may run on 2"), std::string::npos) << msg;
    }
  }
}

TEST(CpuSplit, AllowedCpusAreTheProcesssAndPinningNarrowsThem) {
  RestoreCpus restore;
  std::vector<int> all = allowed_cpus();
  ASSERT_FALSE(all.empty());
  ASSERT_TRUE(pin_current_thread({all.back()}));
  EXPECT_EQ(allowed_cpus(), (std::vector<int>{all.back()}));
  EXPECT_FALSE(pin_current_thread({}));
  EXPECT_FALSE(pin_current_thread({-1}));
  EXPECT_EQ(allowed_cpus(), (std::vector<int>{all.back()}));  // unchanged by a refusal
}

TEST(CpuSplit, AThreadTheEngineStartsRunsOnTheEnginesSet) {
  RestoreCpus restore;
  std::vector<int> all = allowed_cpus();
  std::vector<int> seen;
  start_engine_thread([&] { seen = allowed_cpus(); }).join();
  EXPECT_EQ(seen, all) << "no set: where the process may run";
  set_engine_cpus({all.front()});
  EXPECT_EQ(engine_cpus(), (std::vector<int>{all.front()}));
  start_engine_thread([&] { seen = allowed_cpus(); }).join();
  EXPECT_EQ(seen, (std::vector<int>{all.front()}));
  EXPECT_EQ(allowed_cpus(), all) << "the starting thread keeps its own CPUs";
}

}  // namespace
}  // namespace dataecho
