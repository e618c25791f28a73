// Per-element cost of each operator, and of the pipeline the engine issue names:
// range -> shuffle(10000) -> batch(256) -> prefetch(4). Items/s are elements.
//   build/bin/ops_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "dataecho/ops/basic.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/interleave.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"
#include "dataecho/pipeline.h"

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

// The engine issue's target: at least 3 million elements/s on one core.
void BM_ShuffleBatchPrefetch(benchmark::State& s) {
  auto ds = make_prefetch(
      make_batch(make_shuffle(make_range({kN}), {10000, 1, true}), {256, false}), {4});
  drain(s, ds, kN);
}

// A CPU-bound map (mixing hashes) with 1 and 2 threads: the issue asks 2 threads
// for at least 1.8x the throughput of one. Two work sizes: about 6 us per element
// (2,000 rounds, where the per-element handoff between threads shows) and about 60 us
// (20,000 rounds, the order of an image decode).
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

}  // namespace
}  // namespace dataecho

BENCHMARK_MAIN();
