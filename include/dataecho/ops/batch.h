// batch: groups `size` consecutive elements into one Example whose every field is one
// contiguous buffer with a leading batch dimension, and whose rows keep each element's
// id and echo index. Holds the one batch being filled: each element is copied into it
// as it arrives and dropped (not all elements and then the batch); no threads.
// Elements must have the same fields with the same dtype and shape; a mismatch is an
// error naming the field, both shapes and both element ids.
//
// Map-and-batch fusion: when the input is an ordered `map` (parallel or not), the map
// computes each element's largest tensor (at least RowPlacer::kMinRowBytes, with a
// dtype and shape no other field has) straight into its row of the batch, and the
// batch does not copy it: one write of, say, 588 KB of floats per image instead of a
// write to a temporary and a copy into a 77 MB batch. The stats count such rows as
// "placed_rows". Nothing changes in what comes out. Buffers: also the rows of the next
// batches that the map's in-flight outputs (at most parallelism + buffer) fill.
#pragma once

#include <map>
#include <mutex>

#include "dataecho/dataset.h"

namespace dataecho {

struct BatchOptions {
  int64_t size = 32;
  bool drop_remainder = false;  // drop a last batch smaller than `size`
};
DatasetPtr make_batch(DatasetPtr input, const BatchOptions& options);

// The rows of the batches a fused map computes into (see above). The map's k-th output
// since its iterator started or was restored belongs in row k % size of batch k / size;
// the batch (its BatchBuilder) chooses the column from its first element. Thread-safe:
// the map's workers ask for slots while the batch takes finished batches.
class RowPlacer {
 public:
  static constexpr size_t kMinRowBytes = 16 << 10;
  explicit RowPlacer(int64_t batch_size) : size_(batch_size) {}
  // Map side: prepares `slot` for output k; false while no column is chosen.
  bool slot_for(int64_t k, OutputSlot* slot);
  // Batch side.
  bool has_column() const;
  void set_column(DType dtype, const Shape& shape);
  bool is_column(DType dtype, const Shape& shape) const;
  std::shared_ptr<Buffer> batch_buffer(int64_t b);  // created on first use
  bool holds(const Buffer* buffer) const;           // one of the batch buffers
  void finish_batch(int64_t b);                     // the placer lets go of it
  void reset();  // numbering starts again at 0 (restore); buffers are let go

 private:
  std::shared_ptr<Buffer> buffer_locked(int64_t b);
  const int64_t size_;
  mutable std::mutex mu_;
  bool has_column_ = false;
  DType dtype_ = DType::kUInt8;
  Shape shape_;
  size_t row_bytes_ = 0;
  std::map<int64_t, std::shared_ptr<Buffer>> buffers_;
};

// Builds one batch of up to `capacity` rows element by element. add() checks an element
// against the first (same fields, dtypes and shapes; errors name the field, both shapes
// and both element ids) and copies it into the batch's buffers at once, so the caller
// can drop it while its bytes are still in cache. finish() returns the batch (its
// fields' leading dimension is the number of rows added) and empties the builder.
// With a RowPlacer, a row the map already computed in place is not copied.
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

// Collates `elements` (at least one) into one batch. Exposed for map functions and tests.
Example collate(const std::vector<Example>& elements, const std::string& stage = "batch");

}  // namespace dataecho
