// bucket: padded batches of elements of similar length, as tf.data's
// bucket_by_sequence_length (docs/text.md).
//
// An element's length is the first dimension of `field`. With boundaries b0 < b1 < ...,
// bucket 0 takes lengths < b0, bucket i lengths in [b(i-1), b(i)), the last bucket
// lengths >= the last boundary. Each bucket fills one batch at a time, padded as
// padded_batch pads (ops/padded_batch.h, the same `pad` options and length fields):
//   batch_sizes: one per bucket (boundaries + 1 of them): a bucket's batch is emitted
//                when it holds that many elements;
//   token_budget: a bucket's batch is emitted before an element would make
//                rows x longest row exceed the budget (a longer element alone may).
// The output depends on the input order alone (no randomness, no timing), so it is the
// same at every thread count. At the end of the input the partial batches are emitted,
// bucket by bucket, or dropped with `drop_remainder`.
// Holds at most one partial batch per bucket (the elements, not copies); no threads.
// Save/restore: the elements each bucket holds (a pipeline saved mid-bucket continues
// identically). Stats: as padded_batch ("fresh_rows", "duplicate_rows", "pad_elements",
// "value_elements").
#pragma once

#include <vector>

#include "dataecho/ops/padded_batch.h"

namespace dataecho {

struct BucketOptions {
  std::string field = "tokens";
  std::vector<int64_t> boundaries = {};   // increasing, >= 1; may be empty (one bucket)
  std::vector<int64_t> batch_sizes = {};  // boundaries.size() + 1 of them, or empty with:
  int64_t token_budget = 0;               // > 0 instead of batch_sizes
  bool drop_remainder = false;
  PadOptions pad{};
};
DatasetPtr make_bucket(DatasetPtr input, const BucketOptions& options);

}  // namespace dataecho
