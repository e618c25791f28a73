// sample: several inputs (whole pipelines) mixed by weight. Each element comes from input
// i with probability weights[i] / (sum of the weights of the inputs still running),
// drawn from a seeded Rng, so the mixture is a function of the seed and the inputs
// alone (tf.data's sample_from_datasets, torchdata's SampleMultiplexer). Elements keep
// their inputs' ids (two inputs may share one). An echo, shuffle or map inside one
// input applies to that input only.
// Stop rule: kFirst ends the stream when the input drawn is exhausted, kAll goes on with
// the others until every input is (the weights renormalized), kNever restarts an
// exhausted input (a new epoch of it, as `repeat` does) and never ends.
// Save/restore: the Rng, which inputs ended, each input's epoch and its own state.
// Stats: counter "from_input_<i>" per input. Buffers nothing; no threads of its own.
#pragma once

#include <vector>

#include "dataecho/core/dataset.h"

namespace dataecho {

struct SampleOptions {
  std::vector<double> weights;  // one per input, each >= 0, some > 0; empty: equal
  enum class Stop { kFirst, kAll, kNever } stop = Stop::kAll;
  uint64_t seed = 0;
  // When not empty: each element gets this int64 field, the index of the input it came
  // from (the spec's "input_field").
  std::string input_field;
};

DatasetPtr make_sample(std::vector<DatasetPtr> inputs, SampleOptions options);

}  // namespace dataecho
