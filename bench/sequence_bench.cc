// `pack` and `padded_batch` against a hand loop doing the same copies, in tokens per
// second (input tokens, the EOS included; padding not counted).
//
//   build/bin/sequence_bench --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_counters_tabular=true
//
// Input: kSequences int32 token sequences held in memory, lengths drawn once (seed 7)
// from a log-normal distribution (median 256 tokens, sigma 0.9, clamped to 8..8192: a
// long tail, as documents' lengths have), each ending with the EOS id 256.
// Each iteration runs the whole input once; each run lasts at least 2 s (MinTime).
// bench/text_compare.sh runs it with --benchmark_repetitions=5 and
// --benchmark_enable_random_interleaving=true, so that a busy machine's load falls on
// every side alike, and compares medians of CPU time (a single thread each).
//   BM_Pack:              memory source -> pack(length 2048): blocks of tokens, the
//                         per-token document index and the block's sequence ids.
//   BM_PackHand:          the same blocks written by a plain loop: each block's three
//                         tensors allocated, the tokens copied in, the document index
//                         filled, the ids listed.
//   BM_PaddedBatch:       memory source -> padded_batch(32): tokens [32, longest] padded
//                         with 0, tokens_length int32 [32].
//   BM_PaddedBatchHand:   the same batches by a plain loop: 32 rows held (as the stage
//                         holds them), the longest found, one [32, longest] tensor
//                         allocated, each row copied and its tail zeroed, the lengths
//                         written.
// A hand loop reads its input either from the vector itself (via_source:0) or through
// the memory source the stages read (via_source:1: an iterator call and an Example copy
// per sequence); against the latter the two sides differ by the stage alone (its
// iterator, checks, stats and output metadata).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>

#include "dataecho/core/pipeline.h"
#include "dataecho/ops/pack.h"
#include "dataecho/ops/padded_batch.h"
#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

constexpr int kSequences = 16384;
constexpr int64_t kBlock = 2048;
constexpr int64_t kBatch = 32;
constexpr int32_t kEos = 256;

struct Corpus {
  std::vector<Example> sequences;
  int64_t tokens = 0;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    std::mt19937_64 rng(7);
    std::lognormal_distribution<double> length(std::log(256.0), 0.9);
    std::uniform_int_distribution<int32_t> byte(32, 126);
    for (int i = 0; i < kSequences; ++i) {
      const auto n = static_cast<size_t>(std::clamp(length(rng), 8.0, 8192.0));
      std::vector<int32_t> t(n);
      for (size_t k = 0; k + 1 < n; ++k) t[k] = byte(rng);
      t[n - 1] = kEos;
      Example e(i);
      e.set("tokens", Tensor::from_vector(t));
      c.sequences.push_back(std::move(e));
      c.tokens += static_cast<int64_t>(n);
    }
    return c;
  }();
  return c;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * corpus().tokens);
  state.counters["tokens"] = static_cast<double>(corpus().tokens);
}

void drain(benchmark::State& state, const DatasetPtr& ds) {
  for (auto _ : state) {
    Pipeline p(ds, {});
    int64_t n = 0;
    while (auto e = p.next()) {
      benchmark::DoNotOptimize(e);
      ++n;
    }
    benchmark::DoNotOptimize(n);
  }
  report(state);
}

void BM_Pack(benchmark::State& state) {
  PackOptions o;
  o.length = kBlock;
  o.eos_id = kEos;
  drain(state, make_pack(make_memory_source(corpus().sequences, true), o));
}

Tensor int32_tensor(Shape shape, const std::function<void(int32_t*)>& fill) {
  return Tensor::make(DType::kInt32, std::move(shape),
                      [&](std::byte* p) { fill(reinterpret_cast<int32_t*>(p)); });
}

// The input of a hand loop: the sequences straight from the vector (arg 0), or pulled
// through the same memory source the stages read (arg 1), so that the two sides differ
// in the stage alone.
class Input {
 public:
  explicit Input(bool via_source) {
    static const DatasetPtr source = make_memory_source(corpus().sequences, true);
    if (via_source) it_ = source->make_iterator({});
  }
  // The next sequence (valid until the next call), or null at the end.
  const Example* next() {
    if (!it_) return i_ < corpus().sequences.size() ? &corpus().sequences[i_++] : nullptr;
    current_ = it_->next();
    return current_ ? &*current_ : nullptr;
  }

 private:
  std::unique_ptr<Iterator> it_;  // the iterator a stage reads its input from
  std::optional<Example> current_;
  size_t i_ = 0;
};

void BM_PackHand(benchmark::State& state) {
  for (auto _ : state) {
    Input in(state.range(0) != 0);
    const Example* cur = in.next();
    int64_t pos = 0, blocks = 0;  // tokens of cur already in blocks
    while (cur != nullptr) {
      std::vector<int64_t> ids;
      std::vector<int32_t> docs(kBlock);
      Tensor tokens = int32_tensor({kBlock}, [&](int32_t* dst) {
        int64_t filled = 0;
        int32_t doc = 0;
        while (filled < kBlock && cur != nullptr) {
          const Tensor& t = cur->get("tokens");
          const int64_t take = std::min(kBlock - filled, t.num_elements() - pos);
          std::memcpy(dst + filled, t.data<int32_t>() + pos, static_cast<size_t>(take) * 4);
          std::fill_n(docs.data() + filled, take, doc++);
          ids.push_back(cur->id());
          filled += take;
          pos += take;
          if (pos == t.num_elements()) cur = in.next(), pos = 0;
        }
        std::fill(dst + filled, dst + kBlock, 0);
        std::fill(docs.data() + filled, docs.data() + kBlock, -1);
      });
      Example out(blocks++);
      out.set("tokens", std::move(tokens));
      out.set("document", Tensor::from_vector(docs));
      out.set("ids", Tensor::from_vector(ids));
      benchmark::DoNotOptimize(out);
    }
  }
  report(state);
}

void BM_PaddedBatch(benchmark::State& state) {
  PaddedBatchOptions o;
  o.size = kBatch;
  drain(state, make_padded_batch(make_memory_source(corpus().sequences, true), o));
}

void BM_PaddedBatchHand(benchmark::State& state) {
  std::vector<Example> rows;
  for (auto _ : state) {
    Input in(state.range(0) != 0);
    for (int64_t b = 0;; b += kBatch) {
      rows.clear();
      int64_t longest = 0;
      while (static_cast<int64_t>(rows.size()) < kBatch) {
        const Example* e = in.next();
        if (e == nullptr) break;
        rows.push_back(*e);
        longest = std::max(longest, e->get("tokens").num_elements());
      }
      if (rows.empty()) break;
      const auto n = static_cast<int64_t>(rows.size());
      std::vector<int32_t> lengths(rows.size());
      Tensor tokens = int32_tensor({n, longest}, [&](int32_t* dst) {
        for (int64_t r = 0; r < n; ++r) {
          const Tensor& t = rows[static_cast<size_t>(r)].get("tokens");
          const int64_t len = t.num_elements();
          std::memcpy(dst + r * longest, t.data<int32_t>(), static_cast<size_t>(len) * 4);
          std::fill(dst + r * longest + len, dst + (r + 1) * longest, 0);
          lengths[static_cast<size_t>(r)] = static_cast<int32_t>(len);
        }
      });
      Example out(b);
      out.set("tokens", std::move(tokens));
      out.set("tokens_length", Tensor::from_vector(lengths));
      benchmark::DoNotOptimize(out);
    }
  }
  report(state);
}

#define SEQUENCE_BENCH(fn) BENCHMARK(fn)->Unit(benchmark::kMillisecond)->MinTime(2.0)

SEQUENCE_BENCH(BM_Pack);
SEQUENCE_BENCH(BM_PackHand)->ArgName("via_source")->Arg(0)->Arg(1);
SEQUENCE_BENCH(BM_PaddedBatch);
SEQUENCE_BENCH(BM_PaddedBatchHand)->ArgName("via_source")->Arg(0)->Arg(1);

}  // namespace
}  // namespace dataecho

BENCHMARK_MAIN();
