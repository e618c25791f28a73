// BatchBuilder and collate: how `batch` (and the trainer's and tests' collation) lays
// elements into one batch. Internal to the library.
#pragma once

#include <string>
#include <vector>

#include "dataecho/core/example.h"
#include "dataecho/core/stats.h"

namespace dataecho {

class RowPlacer;

// Builds one batch of up to `capacity` rows element by element. add() checks an element
// against the first (same fields, dtypes and shapes; errors name the field, both shapes
// and both element ids) and copies it into the batch's buffers at once, so the caller
// can drop it while its bytes are still in cache. finish() returns the batch (its
// fields' leading dimension is the number of rows added) and empties the builder.
// With a RowPlacer (map-and-batch fusion), a row the map already placed is not copied.
class BatchBuilder {
 public:
  BatchBuilder(int64_t capacity, std::string stage = "batch");
  // Fused with a map: this is batch `batch_index` of `placer`'s numbering.
  BatchBuilder(int64_t capacity, std::string stage, RowPlacer* placer, int64_t batch_index);
  void add(const Example& element);
  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  int64_t placed_rows() const { return placed_rows_; }  // rows found in place, not copied
  Example finish();

 private:
  struct Column {
    std::string name;
    DType dtype{};
    Shape shape;
    size_t row_bytes = 0;
    std::shared_ptr<Buffer> buffer;
    bool placed = false;  // the buffer is the placer's: rows may already be in place
  };
  void place_column();
  int64_t capacity_;
  std::string stage_;
  RowPlacer* placer_ = nullptr;
  int64_t batch_index_ = 0;
  int64_t placed_rows_ = 0;
  int64_t first_id_ = 0;
  std::vector<Column> columns_;
  std::vector<RowMeta> rows_;
};

// The row counters of a batching node's stats: "fresh_rows" (echo index 0) and
// "duplicate_rows" (rows whose source id already appeared earlier in the same batch:
// what a shuffle after echo reduces). Used by batch, padded_batch and bucket.
class BatchRowStats {
 public:
  void count(NodeStats* stats, const Example& batch);

 private:
  std::vector<int64_t> ids_;
  std::atomic<int64_t>* fresh_rows_ = nullptr;
  std::atomic<int64_t>* duplicate_rows_ = nullptr;
};

// Collates `elements` (at least one) into one batch.
Example collate(const std::vector<Example>& elements, const std::string& stage = "batch");

}  // namespace dataecho
