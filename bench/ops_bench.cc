// Per-element cost of each operator, and of the pipeline of the engine's throughput target:
// range -> shuffle(10000) -> batch(256) -> prefetch(4). Items/s are elements.
//   build/bin/ops_bench --benchmark_counters_tabular=true
// The TextLines rows: elements the size of a text line (a 40-byte tensor) handed
// between threads by a parallel map and by prefetch.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "dataecho/core/pipeline.h"
#include "dataecho/ops/basic.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/interleave.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

constexpr int64_t kN = 1 << 20;

// Runs `ds` to the end `state.iterations()` times; counts input elements.
void drain(benchmark::State& state, const DatasetPtr& ds, int64_t elements) {
  for (auto _ : state) {
    Pipeline p(ds, {});
    int64_t n = 0;
    while (auto e = p.next()) {
      benchmark::DoNotOptimize(e);
      ++n;
    }
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations() * elements);
}

void BM_Range(benchmark::State& s) { drain(s, make_range({kN}), kN); }
void BM_Take(benchmark::State& s) { drain(s, make_take(make_range({kN}), kN), kN); }
void BM_Skip(benchmark::State& s) { drain(s, make_skip(make_range({kN}), 1), kN); }
void BM_Repeat(benchmark::State& s) { drain(s, make_repeat(make_range({kN / 4}), 4), kN); }
void BM_Filter(benchmark::State& s) {
  drain(s, make_filter(make_range({kN}), "all", [](const Example&) { return true; }), kN);
}
void BM_Shard(benchmark::State& s) { drain(s, make_shard(make_range({kN}), 1, 0), kN); }
void BM_Shuffle(benchmark::State& s) {
  drain(s, make_shuffle(make_range({kN}), {s.range(0), 1, true}), kN);
}
void BM_Batch(benchmark::State& s) {
  drain(s, make_batch(make_range({kN}), {s.range(0), false}), kN);
}
void BM_Prefetch(benchmark::State& s) {
  drain(s, make_prefetch(make_range({kN}), {s.range(0)}), kN);
}
void BM_MapIdentity(benchmark::State& s) {
  MapOptions o;
  o.fn = [](Example e, const MapContext&) { return e; };
  o.parallelism = static_cast<int>(s.range(0));
  drain(s, make_map(make_range({kN / 4}), o), kN / 4);
}
void BM_Interleave(benchmark::State& s) {
  drain(s, make_interleave(make_range({kN, 8}), {4, s.range(0), 16}), kN);
}

// The engine's throughput target: at least 3 million elements/s on one core
// (docs/performance.md).
void BM_ShuffleBatchPrefetch(benchmark::State& s) {
  auto ds = make_prefetch(
      make_batch(make_shuffle(make_range({kN}), {10000, 1, true}), {256, false}), {4});
  drain(s, ds, kN);
}

// A CPU-bound map (mixing hashes) with 1 and 2 threads: the target is 2 threads giving at
// least 1.8x the throughput of one (docs/performance.md). Two work sizes: about 6 us per
// element (2,000 rounds, where the per-element handoff between threads shows) and about
// 60 us (20,000 rounds, the order of an image decode).
void BM_MapBurn(benchmark::State& s) {
  MapOptions o;
  o.name = "burn";
  o.parallelism = static_cast<int>(s.range(0));
  const int rounds = static_cast<int>(s.range(1));
  if (s.range(2) > 0) o.buffer = static_cast<int>(s.range(2));
  o.fn = [rounds](Example e, const MapContext&) {
    uint64_t x = static_cast<uint64_t>(e.id());
    for (int i = 0; i < rounds; ++i) x = mix64(x);
    e.set("hash", Tensor::scalar<int64_t>(static_cast<int64_t>(x)));
    return e;
  };
  const int64_t n = 40'000'000 / rounds;
  drain(s, make_map(make_range({n}), o), n);
}

// 2^16 distinct lines of 40 bytes, repeated 4 times: 2^18 elements per pass.
constexpr int64_t kLines = 1 << 16;
constexpr int64_t kLinePasses = 4;

DatasetPtr text_lines() {
  static const DatasetPtr lines = [] {
    std::vector<Example> v;
    v.reserve(kLines);
    for (int64_t i = 0; i < kLines; ++i) {
      std::string s = "line " + std::to_string(i) + " of a text file, padded";
      s.resize(40, '.');
      Example e(i);
      e.set("text", Tensor::from_bytes(s));
      v.push_back(std::move(e));
    }
    return make_memory_source(std::move(v));
  }();
  return make_repeat(lines, kLinePasses);
}

// A cheap function on a line: its length in a new scalar field.
MapOptions line_length(int parallelism, int64_t buffer) {
  MapOptions o;
  o.name = "length";
  o.parallelism = parallelism;
  o.buffer = buffer;
  o.fn = [](Example e, const MapContext&) {
    const auto n = static_cast<int64_t>(e.get("text").nbytes());
    e.set("length", Tensor::scalar<int64_t>(n));
    return e;
  };
  return o;
}

// Args: map parallelism (0: no map), map buffer, prefetch buffer (0: no prefetch).
void BM_TextLines(benchmark::State& s) {
  DatasetPtr ds = text_lines();
  if (s.range(0) > 0) ds = make_map(ds, line_length(static_cast<int>(s.range(0)), s.range(1)));
  if (s.range(2) > 0) ds = make_prefetch(ds, {s.range(2)});
  drain(s, ds, kLines * kLinePasses);
}

BENCHMARK(BM_Range)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Take)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Skip)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Repeat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Filter)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Shard)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Shuffle)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Batch)->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prefetch)->Arg(4)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MapIdentity)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Interleave)->Arg(0)->Arg(-1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ShuffleBatchPrefetch)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MapBurn)
    ->Args({1, 2000, 0})
    ->Args({2, 2000, 0})
    ->Args({2, 2000, 2})
    ->Args({1, 20000, 0})
    ->Args({2, 20000, 0})
    ->Args({2, 20000, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_TextLines)
    ->ArgNames({"map", "map_buffer", "prefetch"})
    ->Args({0, 0, 0})
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->Args({2, 256, 0})
    ->Args({0, 0, 4})
    ->Args({0, 0, 256})
    ->Args({2, 0, 4})
    ->Args({2, 0, 256})
    ->Args({2, 256, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dataecho

BENCHMARK_MAIN();
