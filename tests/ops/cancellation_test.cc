// Destroying or cancelling a pipeline returns promptly whatever its threads are doing.
// The bounds below (seconds) are generous functional limits, not benchmarks: without
// cancellation these tests would block for minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "test_util.h"

namespace dataecho::testing {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(Cancellation, DestroyWhileProducersBlockOnFullBuffers) {
  auto p = build(R"({"source": {"kind": "range", "count": 1000000, "shards": 4},
    "stages": [{"op": "interleave", "cycle": 4}, {"op": "map", "fn": "square", "parallelism": 3},
               {"op": "prefetch", "buffer": 2}]})");
  ASSERT_TRUE(p->next());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let every buffer fill
  auto t0 = Clock::now();
  p.reset();
  EXPECT_LT(seconds_since(t0), 5.0);
}

// The map's consumer is woken in batches; results done but waiting behind an element
// still being made (id 3, sleeping) wake it too, or it finds them when it looks again
// (src/ops/map_claim.h kMapLookAgain), so element 0 comes out; then the
// pipeline goes while a worker sleeps on id 3. (Elements 1 and 2 may share id 3's claim,
// whose results are put down together, and a prefetch after the map holds what it
// pulled while its next pull waits: they would wait for the sleep. docs/performance.md)
TEST(Cancellation, DestroyWhileAMapFunctionSleeps) {
  auto p = build(R"({"source": {"kind": "range", "count": 100},
    "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 60000, "ids": [3]}, "parallelism": 2}]})");
  auto t0 = Clock::now();
  ASSERT_EQ(p->next()->id(), 0);
  EXPECT_LT(seconds_since(t0), 5.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a worker is now asleep on id 3
  t0 = Clock::now();
  p.reset();
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(Cancellation, CancelWakesAConsumerBlockedInNext) {
  auto p = build(R"({"source": {"kind": "range", "count": 10},
    "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 60000}, "parallelism": 2},
               {"op": "prefetch", "buffer": 1}]})");
  auto t0 = Clock::now();
  auto consumer = std::async(std::launch::async, [&] {
    try {
      p->next();
      return std::string("returned");
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  p->cancel();
  ASSERT_EQ(consumer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(consumer.get(), "cancelled");
  p.reset();
  EXPECT_LT(seconds_since(t0), 6.0);
}

TEST(Cancellation, DestroyBeforeFirstNextAndAfterEnd) {
  const char* spec = R"({"source": {"kind": "range", "count": 20, "shards": 2},
    "stages": [{"op": "interleave", "cycle": 2}, {"op": "map", "fn": "square", "parallelism": 2},
               {"op": "prefetch"}]})";
  { auto p = build(spec); }
  {
    auto p = build(spec);
    EXPECT_EQ(drain(*p).size(), 20u);
    EXPECT_FALSE(p->next());
  }
}

}  // namespace
}  // namespace dataecho::testing
