// map: applies a function to every element, on `parallelism` threads.
// Buffers at most `parallelism + buffer` elements (in flight plus finished but not yet
// taken); a slow consumer blocks the workers. Ordered by default: outputs come in input
// order whatever the thread timing; `deterministic = false` emits each as it finishes.
// A function that throws fails the stream at that element: the consumer's next()
// throws an Error naming this node, the function and the element id, after every
// element before it (ordered mode), and the stream then ends.
// With parallelism 1 no thread is started: the function runs inside next() (unless
// autotuned: then the workers are threads at every parallelism).
// Workers take several input elements at once when the function is cheap (under 100 us
// an element, measured as they go), so that taking and filing elements does not cost
// more than computing them; the stats count the takes as "input_takes".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dataecho/core/cancellation.h"
#include "dataecho/core/dataset.h"
#include "dataecho/core/rng.h"

namespace dataecho {

// What a map function may use besides its element. Randomness must come from
// rng_for(element), so that each copy of each element gets its own reproducible stream.
struct MapContext {
  uint64_t seed = 0;  // the node's seed
  const CancellationToken* cancel = nullptr;
  Rng rng_for(const Example& e) const { return Rng(element_seed(seed, e.id(), e.echo())); }
};
using MapFn = std::function<Example(Example, const MapContext&)>;

struct MapOptions {
  std::string name = "fn";  // shown in stats and errors
  MapFn fn;
  int parallelism = 1;
  // "parallelism": "auto": the pipeline's tuner sets the parallelism while it runs
  // (core/tuner.h), from 1 up to `max_parallelism`; the output is the same as at any
  // fixed parallelism.
  bool autotune = false;
  int max_parallelism = 64;
  bool deterministic = true;
  // Finished elements waiting for the consumer; 0: max(16, parallelism), or for a cheap
  // function of small elements as many as hold about 400 us of its work, measured as it
  // runs (at most 1,024 elements and 1 MiB of them, each counted at the larger of its
  // input and its result: src/ops/map_claim.h). The consumer
  // is woken once half of `parallelism + buffer` results are ready (or at the end), so
  // a larger buffer means fewer thread wake-ups: on a 2-core VM, 2 threads on a 60 us
  // function reach 1.45x of one thread with buffer 2 and 1.8x with 16 (bench/ops_bench).
  int64_t buffer = 0;
  uint64_t seed = 0;
};
DatasetPtr make_map(DatasetPtr input, MapOptions options);

}  // namespace dataecho
