// The echo operator's own cost per element, next to a bare source for reference.
// Each iteration pulls one element from a pipeline built from a spec (with stats on, as
// in real use). The echo's own cost per output is about
//   time(range -> echo e) - time(range) / e
// since a factor e reads one source element per e outputs. Target: under 50 ns.
#include <benchmark/benchmark.h>

#include "dataecho/spec/build.h"

namespace dataecho {
namespace {

std::unique_ptr<Pipeline> pipeline(const std::string& stages) {
  return build_pipeline(nlohmann::json::parse(
      R"({"seed": 1, "source": {"kind": "range", "count": 1099511627776}, "stages": [)" + stages +
      "]}"));
}

void pull(benchmark::State& state, Pipeline& p) {
  for (auto _ : state) {
    auto e = p.next();
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RangeSource(benchmark::State& state) {
  auto p = pipeline("");
  pull(state, *p);
}
BENCHMARK(BM_RangeSource);

// A node that passes elements through: the per-node cost every operator pays (the
// base class's stats), for comparison with echo at factor 1.
void BM_RangeTake(benchmark::State& state) {
  auto p = pipeline(R"({"op": "take", "count": 1099511627776})");
  pull(state, *p);
}
BENCHMARK(BM_RangeTake);

// Factor in tenths: 10 = identity, 20 = 2, 25 = 2.5, 40 = 4.
void BM_RangeEcho(benchmark::State& state) {
  const double factor = static_cast<double>(state.range(0)) / 10;
  auto p = pipeline(R"({"op": "echo", "factor": )" + std::to_string(factor) + "}");
  pull(state, *p);
}
BENCHMARK(BM_RangeEcho)->Arg(10)->Arg(20)->Arg(25)->Arg(40);

// Batch echoing: each repeat also rewrites the batch's row metadata (32 rows).
void BM_BatchSource(benchmark::State& state) {
  auto p = pipeline(R"({"op": "batch", "size": 32})");
  pull(state, *p);
}
BENCHMARK(BM_BatchSource);

void BM_BatchEcho(benchmark::State& state) {
  auto p = pipeline(R"({"op": "batch", "size": 32}, {"op": "echo", "factor": 2})");
  pull(state, *p);
}
BENCHMARK(BM_BatchEcho);

// Adaptive mode with a fast upstream: the cost of the hand-off between its thread and
// the consumer (almost every element is fresh), next to a prefetch doing the same.
void BM_RangePrefetch(benchmark::State& state) {
  auto p = pipeline(R"({"op": "prefetch", "buffer": 8})");
  pull(state, *p);
}
BENCHMARK(BM_RangePrefetch)->UseRealTime();

// Arg: the echo's buffer (8, the old default; 1024, the default since 122c893, 2026-12-01).
void BM_RangeAdaptiveEcho(benchmark::State& state) {
  auto p = pipeline(R"({"op": "echo", "factor": "adaptive", "max_factor": 4, "buffer": )" +
                    std::to_string(state.range(0)) + "}");
  pull(state, *p);
  for (const auto& n : p->stats().to_json()) {
    if (n.contains("values") && n["values"].contains("achieved_factor")) {
      state.counters["achieved_factor"] = n["values"]["achieved_factor"].get<double>();
    }
  }
}
BENCHMARK(BM_RangeAdaptiveEcho)->Arg(8)->Arg(1024)->UseRealTime();

}  // namespace
}  // namespace dataecho

BENCHMARK_MAIN();
