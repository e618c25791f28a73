// batch: groups `size` consecutive elements into one Example whose every field is one
// contiguous buffer with a leading batch dimension, and whose rows keep each element's
// id and echo index. Holds the one batch being filled: each element is copied into it
// as it arrives and dropped (not all elements and then the batch); no threads.
// Elements must have the same fields with the same dtype and shape; a mismatch is an
// error naming the field, both shapes and both element ids.
//
// Map-and-batch fusion: PipelineDef::build (every spec and the builder) fuses a batch
// with an ordered map right below it, so that the map computes its outputs' largest
// tensors straight into the batch rows (src/ops/map_and_batch.h). A batch assembled by
// hand with make_batch is not fused.
#pragma once

#include "dataecho/core/dataset.h"

namespace dataecho {

struct BatchOptions {
  int64_t size = 32;
  bool drop_remainder = false;  // drop a last batch smaller than `size`
};
DatasetPtr make_batch(DatasetPtr input, const BatchOptions& options);

}  // namespace dataecho
