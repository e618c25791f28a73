// batch: groups `size` consecutive elements into one Example whose every field is one
// contiguous buffer with a leading batch dimension, and whose rows keep each element's
// id and echo index. Buffers one batch (the elements being collated); no threads.
// Elements must have the same fields with the same dtype and shape; a mismatch is an
// error naming the field, both shapes and both element ids.
#pragma once

#include "dataecho/dataset.h"

namespace dataecho {

struct BatchOptions {
  int64_t size = 32;
  bool drop_remainder = false;  // drop a last batch smaller than `size`
};
DatasetPtr make_batch(DatasetPtr input, const BatchOptions& options);

// Collates `elements` (at least one) into one batch. Exposed for map functions and tests.
Example collate(const std::vector<Example>& elements, const std::string& stage = "batch");

}  // namespace dataecho
