// Small elements handed between threads in batches: a parallel map's consumer
// and prefetch's consumer take every ready element under one lock and hand them out
// from a buffer of their own. These tests hold the semantics that must not move:
// order and content, save/restore with elements in that buffer, cancellation and
// destruction mid-stream, an input's error after exactly the elements before it, and
// the bound on buffered elements.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "counting_source.h"
#include "dataecho/core/pipeline.h"
#include "dataecho/ops/basic.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// A text line's worth of bytes per element, made from its id.
MapOptions to_line(int parallelism, int64_t buffer = 0) {
  MapOptions o;
  o.name = "line";
  o.parallelism = parallelism;
  o.buffer = buffer;
  o.fn = [](Example e, const MapContext&) {
    std::string s = "line " + std::to_string(e.id()) + " of a text file";
    s.resize(40, '.');
    e.set("text", Tensor::from_bytes(s));
    return e;
  };
  return o;
}

std::vector<std::string> texts(const std::vector<Example>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const Example& e : v) out.emplace_back(e.get("text").bytes());
  return out;
}

std::vector<Example> drain_all(const DatasetPtr& ds) {
  Pipeline p(ds, {});
  return drain(p);
}

// An input that throws after `good` elements.
DatasetPtr failing_after(int64_t n, int64_t good) {
  MapOptions f;
  f.name = "fail";
  f.fn = [good](Example e, const MapContext&) {
    if (e.id() == good) throw std::runtime_error("bad record");
    return e;
  };
  return make_map(make_range({n}), f);
}

// Through a prefetch as well: what comes out of the pair is what the map emitted, in
// order, and it has crossed two handoffs.
TEST(Handoff, ParallelMapMatchesTheInlineMapOnSmallElements) {
  constexpr int64_t kN = 20'000;  // hundreds of claims and wake-ups; seconds under TSan
  const auto inline_map = texts(drain_all(make_map(make_range({kN}), to_line(1))));
  ASSERT_EQ(inline_map.size(), static_cast<size_t>(kN));
  for (int p : {1, 3}) {
    for (int64_t buffer : {0, 256}) {
      SCOPED_TRACE("parallelism " + std::to_string(p) + " buffer " + std::to_string(buffer));
      auto got = drain_all(make_prefetch(make_map(make_range({kN}), to_line(p, buffer)), {64}));
      EXPECT_EQ(ids(got), iota(kN));
      EXPECT_EQ(texts(got), inline_map);
    }
  }
}

TEST(Handoff, UnorderedMapDeliversEverySmallElementOnce) {
  constexpr int64_t kN = 50'000;
  MapOptions o = to_line(3, 64);
  o.deterministic = false;
  auto got = ids(drain_all(make_map(make_range({kN}), o)));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, iota(kN));
}

// Saves after `k` elements, with the consumer's buffer holding some (the first take
// came after the workers had filled the bound), and checks that both the saving
// pipeline and a fresh one restored from the state go on with the same elements.
void expect_restore_continues(const DatasetPtr& ds, int64_t n, int64_t k) {
  Pipeline p(ds, {});
  ASSERT_TRUE(p.next());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int64_t i = 1; i < k; ++i) ASSERT_TRUE(p.next());
  const std::string state = p.save();
  const auto rest = ids(drain(p));
  EXPECT_EQ(rest, iota(n - k, k));
  Pipeline q(ds, {});
  q.restore(state);
  EXPECT_EQ(ids(drain(q)), rest);
  p.restore(state);  // into the pipeline that saved, after it went on
  EXPECT_EQ(ids(drain(p)), rest);
}

TEST(Handoff, SaveRestoreWithElementsInTheConsumersBuffer) {
  constexpr int64_t kN = 2000;
  for (int64_t k : {2, 5, 37}) {
    SCOPED_TRACE("saved after " + std::to_string(k));
    expect_restore_continues(make_prefetch(make_range({kN}), {64}), kN, k);
    expect_restore_continues(make_map(make_range({kN}), to_line(3, 64)), kN, k);
    expect_restore_continues(make_prefetch(make_map(make_range({kN}), to_line(2)), {16}), kN, k);
  }
}

TEST(Handoff, InputErrorAfterExactlyTheElementsBefore) {
  const std::vector<std::pair<std::string, DatasetPtr>> cases = {
      {"prefetch", make_prefetch(failing_after(10'000, 777), {64})},
      {"map", make_map(failing_after(10'000, 777), to_line(3, 64))},
      {"map+prefetch", make_prefetch(make_map(failing_after(10'000, 777), to_line(2)), {256})},
  };
  for (const auto& [name, ds] : cases) {
    SCOPED_TRACE(name);
    Pipeline p(ds, {});
    for (int64_t i = 0; i < 777; ++i) ASSERT_EQ(p.next()->id(), i);
    std::string msg = error_of([&] { p.next(); });
    EXPECT_NE(msg.find("bad record"), std::string::npos) << msg;
    EXPECT_FALSE(p.next()) << "the stream ends after the error";
  }
}

TEST(Handoff, DestroyedOrCancelledMidStreamDoesNotHang) {
  const std::vector<DatasetPtr> cases = {
      make_prefetch(make_range({1'000'000}), {256}),
      make_map(make_range({1'000'000}), to_line(3, 256)),
      make_prefetch(make_map(make_range({1'000'000}), to_line(2)), {64}),
  };
  for (const auto& ds : cases) {
    {
      Pipeline p(ds, {});
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(p.next());
    }  // destroyed with elements in every buffer
    Pipeline p(ds, {});
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(p.next());
    p.cancel();
    std::string msg = error_of([&] {
      while (p.next()) {
      }
    });
    EXPECT_NE(msg.find("cancel"), std::string::npos) << msg;
  }
}

// Every element but the first blocks until the pipeline is cancelled: the worker that
// made element 0 files it alone (short of a wake batch) and both workers then sit in
// blocked elements, so no worker will wake the consumer. It finds element 0 itself
// (src/ops/map_claim.h kMapLookAgain) instead of waiting for the blocked ones.
TEST(Handoff, AResultIsNotStrandedWhileEveryWorkerIsInASlowElement) {
  MapOptions o;
  o.name = "stall";
  o.parallelism = 2;
  o.fn = [](Example e, const MapContext& ctx) {
    if (e.id() != 0 && !ctx.cancel->sleep_for(std::chrono::seconds(60)))
      throw_error(ErrorCode::kCancelled, "", "cancelled");
    return e;
  };
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    {
      Pipeline p(make_map(make_range({100'000}), o), {});
      auto e = p.next();
      ASSERT_TRUE(e);
      EXPECT_EQ(e->id(), 0);
    }  // destroyed with both workers in blocked elements
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  }
}

// The consumer's buffer counts against the bound: with the consumer holding its
// buffer and not taking, the input is never read more than the bound ahead.
TEST(Handoff, TheConsumersBufferCountsAgainstTheBound) {
  {
    auto src = std::make_shared<CountingSource>(100'000);
    auto it = make_prefetch(src, {32})->make_iterator({});
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(it->next());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_LE(src->pulled(), 3 + 32);
  }
  {
    auto src = std::make_shared<CountingSource>(100'000);
    MapOptions o = to_line(3, 29);
    auto it = make_map(src, o)->make_iterator({});
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(it->next());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_LE(src->pulled(), 3 + 3 + 29);
  }
}

// The default buffer grows for a cheap function, but never past 1 MiB of elements
// (src/ops/map_claim.h map_cheap_buffer), each counted at the larger of its input and
// its result: an identity map of 8 KiB elements holds at most 128 of them (without the
// bound in bytes, 1,024 here), one of scalars at most 1,024. What the consumer has not
// taken is bounded by that whatever the function's measured cost.
TEST(Handoff, TheGrownBufferHoldsAtMostAMebibyteOfElements) {
  for (const int64_t element_bytes : {int64_t{8} << 10, int64_t{0}}) {
    auto src = std::make_shared<CountingSource>(100'000);
    const int64_t n = std::max<int64_t>(element_bytes, 1);
    const Tensor blob = Tensor::make(
        DType::kUInt8, {n}, [n](std::byte* out) { std::memset(out, 1, static_cast<size_t>(n)); });
    MapOptions attach;  // inline: runs as the parallel map's workers take their input
    attach.name = "attach";
    attach.fn = [blob, element_bytes](Example e, const MapContext&) {
      if (element_bytes > 0) e.set("blob", blob);
      return e;
    };
    MapOptions identity;
    identity.name = "identity";
    identity.parallelism = 2;
    identity.fn = [](Example e, const MapContext&) { return e; };
    auto it = make_map(make_map(src, attach), identity)->make_iterator({});
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(it->next());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Taken (3), in the workers' hands or filed (parallelism + buffer).
    const int64_t buffer = element_bytes > 0 ? (int64_t{1} << 20) / element_bytes : 1024;
    EXPECT_LE(src->pulled(), 3 + 2 + buffer) << element_bytes;
  }
}

}  // namespace
}  // namespace dataecho::testing
