// shuffle: a seeded shuffle buffer (tf.data's algorithm). Buffers at most `buffer`
// elements: it fills the buffer, then emits a uniformly chosen element and refills
// its slot from the input. No threads; input errors pass through unchanged.
// What it holds is what `buffer` elements take: an element whose tensors view a much
// larger buffer (a TFRecord record in its read chunk, a row of a batch) is copied into
// buffers of its own as it enters (Example::compact), so that it does not keep the
// larger buffer alive for as long as it waits.
// With `reshuffle_each_iteration`, each epoch (pass of an enclosing `repeat`) uses
// another permutation; the order is a function of the seed and the epoch alone (and of
// the lane, in a lane of an elastic pipeline: ops/elastic.h).
#pragma once

#include "dataecho/core/dataset.h"

namespace dataecho {

struct ShuffleOptions {
  int64_t buffer = 1000;
  uint64_t seed = 0;
  bool reshuffle_each_iteration = true;
};
DatasetPtr make_shuffle(DatasetPtr input, const ShuffleOptions& options);

}  // namespace dataecho
