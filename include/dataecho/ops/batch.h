// batch: groups `size` consecutive elements into one Example whose every field is one
// contiguous buffer with a leading batch dimension, and whose rows keep each element's
// id and echo index. Holds the one batch being filled: each element is copied into it
// as it arrives and dropped (not all elements and then the batch); no threads.
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

// Builds one batch of up to `capacity` rows element by element. add() checks an element
// against the first (same fields, dtypes and shapes; errors name the field, both shapes
// and both element ids) and copies it into the batch's buffers at once, so the caller
// can drop it while its bytes are still in cache. finish() returns the batch (its
// fields' leading dimension is the number of rows added) and empties the builder.
class BatchBuilder {
 public:
  BatchBuilder(int64_t capacity, std::string stage = "batch");
  void add(const Example& element);
  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  Example finish();

 private:
  struct Column {
    std::string name;
    DType dtype{};
    Shape shape;
    size_t row_bytes = 0;
    std::shared_ptr<Buffer> buffer;
  };
  int64_t capacity_;
  std::string stage_;
  int64_t first_id_ = 0;
  std::vector<Column> columns_;
  std::vector<RowMeta> rows_;
};

// Collates `elements` (at least one) into one batch. Exposed for map functions and tests.
Example collate(const std::vector<Example>& elements, const std::string& stage = "batch");

}  // namespace dataecho
