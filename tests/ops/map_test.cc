#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "counting_source.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

MapOptions square(int parallelism, bool deterministic = true) {
  MapOptions o;
  o.name = "square";
  o.parallelism = parallelism;
  o.deterministic = deterministic;
  o.fn = [](Example e, const MapContext&) {
    int64_t v = e.get("value").item<int64_t>();
    // Uneven work, so that threads finish out of order.
    if (v % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    e.set("value", Tensor::scalar<int64_t>(v * v));
    return e;
  };
  return o;
}

std::vector<int64_t> squares(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * i);
  return v;
}

TEST(Map, OrderedWhateverTheParallelism) {
  for (int p : {1, 2, 4, 8}) {
    SCOPED_TRACE(p);
    auto it = make_map(make_range({500}), square(p))->make_iterator({});
    auto out = drain(*it);
    EXPECT_EQ(values(out), squares(500));
    EXPECT_EQ(ids(out), iota(500));
  }
}

TEST(Map, UnorderedDeliversEveryElementOnce) {
  auto it = make_map(make_range({500}), square(4, false))->make_iterator({});
  auto out = ids(drain(*it));
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, iota(500));
}

TEST(Map, FunctionErrorReachesConsumerWithStageAndIdThenEnds) {
  for (int p : {1, 3}) {
    SCOPED_TRACE(p);
    MapOptions o = square(p);
    o.name = "picky";
    o.fn = [](Example e, const MapContext&) {
      if (e.id() == 42) throw std::runtime_error("cannot digest");
      return e;
    };
    // Through the registry and the builder, which label the node ("1:map(picky)").
    static const bool registered =
        (register_map_function("picky", [fn = o.fn](SpecObject&) { return fn; }), true);
    ASSERT_TRUE(registered);
    auto it = range(100).map("picky", nlohmann::json::object(), {.parallelism = p}).build();
    for (int i = 0; i < 42; ++i) ASSERT_EQ(it->next()->id(), i);
    std::string msg = error_of([&] { it->next(); });
    EXPECT_NE(msg.find("1:map(picky)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot digest"), std::string::npos) << msg;
    EXPECT_NE(msg.find("id 42"), std::string::npos) << msg;
    EXPECT_FALSE(it->next());
  }
}

// An inner error that names the same element (a missing field) does not name it twice;
// one that names something else (a file) keeps it.
TEST(Map, FunctionErrorNamesTheElementOnce) {
  MapOptions o = square(1);
  o.name = "needs_image";
  o.fn = [](Example e, const MapContext&) {
    e.get("image");
    return e;
  };
  auto it = make_map(make_range({3}), o)->make_iterator({});
  std::string msg = error_of([&] { it->next(); });
  EXPECT_NE(msg.find("no field 'image' (fields: value) (element id 0)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("(element id 0) (element id 0)"), std::string::npos) << msg;
  o.fn = [](Example, const MapContext&) -> Example {
    throw Error(ErrorCode::kDataLoss, "png", "bad CRC", "a.png");
  };
  it = make_map(make_range({3}), o)->make_iterator({});
  msg = error_of([&] { it->next(); });
  EXPECT_NE(msg.find("png: bad CRC (a.png) (element id 0)"), std::string::npos) << msg;
}

TEST(Map, NeverHoldsMoreThanItsBound) {
  auto src = std::make_shared<CountingSource>(10000);
  MapOptions o = square(4);
  o.buffer = 3;
  auto it = make_map(src, o)->make_iterator({});
  ASSERT_TRUE(it->next());
  for (int i = 0; i < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // One taken by the consumer, at most parallelism + buffer in flight or waiting.
  EXPECT_LE(src->pulled(), 1 + 4 + 3);
  EXPECT_GE(src->pulled(), 2) << "the workers ran ahead at all";
}

TEST(Map, RandomnessComesFromTheElementNotTheThread) {
  auto run_noise = [](int p) {
    MapOptions o;
    o.name = "noise";
    o.parallelism = p;
    o.seed = 99;
    o.fn = [](Example e, const MapContext& ctx) {
      Rng rng = ctx.rng_for(e);
      e.set("noise", Tensor::scalar<int64_t>(static_cast<int64_t>(rng.next_u64() >> 1)));
      return e;
    };
    auto it = make_map(make_range({300}), o)->make_iterator({});
    return values(drain(*it), "noise");
  };
  EXPECT_EQ(run_noise(1), run_noise(4));
}

int64_t input_takes(Pipeline& p) {
  auto stats = p.stats();
  for (const auto& n : stats.nodes())
    if (n->name == "1:map(f)") return n->counter("input_takes").load();
  return -1;
}

// A cheap function's elements are taken several at a time (each take is a lock and
// often a thread wake-up); an expensive one's one at a time, so that the work spreads
// over the threads. Outputs are the same either way.
// In real time (CTest label `timing`: the function's cost is measured on the clock);
// map_claim_size, which sizes the takes from that cost, is tested exactly in
// echo_pool_test.cc (MapClaim).
TEST(MapTiming, CheapElementsAreTakenSeveralAtATime) {
  for (bool cheap : {true, false}) {
    SCOPED_TRACE(cheap);
    // "f": returns its element; with "cheap": false, after 300 us.
    static const bool registered =
        (register_map_function("f",
                               [](SpecObject& a) -> MapFn {
                                 const bool quick = a.get_bool("cheap", true);
                                 return [quick](Example e, const MapContext&) {
                                   if (!quick)
                                     std::this_thread::sleep_for(std::chrono::microseconds(300));
                                   return e;
                                 };
                               }),
         true);
    ASSERT_TRUE(registered);
    const int64_t n = cheap ? 2000 : 100;
    // buffer 64: room for takes of up to 16, whatever the consumer's pace.
    auto p = range(n).map("f", {{"cheap", cheap}}, {.parallelism = 2, .buffer = 64}).build();
    EXPECT_EQ(ids(drain(*p)), iota(n));
    const int64_t takes = input_takes(*p);
    // Under TSan everything, the function and a take alike, runs several times slower,
    // and takes come out smaller: 670 takes for 2,000 elements once (2026-12-02), about
    // 3 per take. At most half as many takes as elements still tells several elements
    // per take from the expensive function's one.
    if (cheap)
      EXPECT_LE(takes, n / 2) << "at most half as many takes as elements";
    else
      EXPECT_GE(takes, n) << "one element per take (and the take that finds the end)";
  }
}

// An input that fails in the middle of a take: every element before the failure comes
// out, then the error, then the end.
TEST(Map, InputErrorInsideATakeKeepsTheElementsBefore) {
  MapOptions o;
  o.name = "f";
  o.parallelism = 2;
  o.fn = [](Example e, const MapContext&) { return e; };
  auto failing = make_map(make_range({1000}), [] {
    MapOptions f;
    f.name = "fail_at_777";
    f.fn = [](Example e, const MapContext&) {
      if (e.id() == 777) throw std::runtime_error("bad record");
      return e;
    };
    return f;
  }());
  auto it = make_map(failing, o)->make_iterator({});
  for (int64_t i = 0; i < 777; ++i) ASSERT_EQ(it->next()->id(), i);
  std::string msg = error_of([&] { it->next(); });
  EXPECT_NE(msg.find("bad record"), std::string::npos) << msg;
  EXPECT_FALSE(it->next());
}

}  // namespace
}  // namespace dataecho::testing
