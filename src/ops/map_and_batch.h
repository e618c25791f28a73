// Map-and-batch fusion: a rewrite that PipelineDef::build applies (as tf.data's
// map_and_batch_fusion does), not part of the iterator contract.
//
// When a `batch` reads straight from a `map` whose k-th output is its k-th input's (a
// map with parallelism 1, or an ordered parallel map), the build replaces the batch with
// a fused batch node. Its iterator hands the map's iterator a RowPlacer, and the map
// calls its function with an OutputSlot armed (core/tensor.h): the function's
// Tensor::make of the output's largest tensor (at least RowPlacer::kMinRowBytes, with a
// dtype and shape no other field has) writes straight into its row of the batch, and
// the batch does not copy it: one write of, say, 588 KB of floats per image instead of
// a write to a temporary and a copy into a 77 MB batch on the consumer's one thread.
// The fused batch's stats count such rows as "placed_rows". Nothing changes in what
// comes out. Buffers: also the rows of the next batches that the map's in-flight
// outputs (at most parallelism + buffer) fill.
//
// Why computed in place rather than copied by the map's worker after the function (as
// tf.data's fused node does): the copy leaves a temporary of the row's size per element,
// freed at once, and malloc's heap fragments around them. tests/ops/memory_bound_test
// (4 MiB rows, batches of 4, prefetch 2 and 10) measured 137-189 MiB and 349-365 MiB
// of peak RSS over the start against bounds of 104 and 232 MiB with the copy (it passed
// with the copy only when GLIBC_TUNABLES fixed malloc's mmap threshold at 1 MiB, so that
// the temporaries bypassed the heap); it passes computed in place. A function that makes
// its output otherwise (a map that passes a tensor through) is not placed: the batch
// copies its rows.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "dataecho/core/dataset.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/fusion.h"

namespace dataecho {

// The rows of the batches a fused map fills. The map's k-th output since its iterator
// started or was restored belongs in row k % size of batch k / size; the batch (its
// BatchBuilder) chooses the column from its first element. Thread-safe: the map's
// workers place rows while the batch takes finished batches.
// A subclass may number otherwise (the elastic merge's lanes: ops/elastic_batch.cc):
// slot_for() and reset() are what the map calls. With `rows_may_move`, a row found in one
// of the placer's buffers but not in its own row is copied (the merge's forecast of a
// row can be off where a lane ends early) instead of being an internal error.
class RowPlacer {
 public:
  static constexpr size_t kMinRowBytes = 16 << 10;
  explicit RowPlacer(int64_t batch_size, bool rows_may_move = false)
      : size_(batch_size), rows_may_move_(rows_may_move) {}
  virtual ~RowPlacer() = default;
  // Map side: prepares `slot` for output k; false while no column is chosen.
  virtual bool slot_for(int64_t k, OutputSlot* slot) { return slot_at(k / size_, k % size_, slot); }
  // Prepares `slot` for row `row` of batch `b`; false while no column is chosen.
  bool slot_at(int64_t b, int64_t row, OutputSlot* slot);
  bool rows_may_move() const { return rows_may_move_; }
  // Batch side.
  bool has_column() const;
  void set_column(DType dtype, const Shape& shape);
  bool is_column(DType dtype, const Shape& shape) const;
  std::shared_ptr<Buffer> batch_buffer(int64_t b);  // created on first use
  bool holds(const Buffer* buffer) const;           // one of the batch buffers
  void finish_batch(int64_t b);                     // the placer lets go of it
  virtual void reset();  // numbering starts again at 0 (restore); buffers are let go

 private:
  std::shared_ptr<Buffer> buffer_locked(int64_t b);
  const int64_t size_;
  const bool rows_may_move_;
  mutable std::mutex mu_;
  bool has_column_ = false;
  DType dtype_ = DType::kUInt8;
  Shape shape_;
  size_t row_bytes_ = 0;
  std::map<int64_t, std::shared_ptr<Buffer>> buffers_;
};

// A node whose iterator can place its outputs' rows (a map): one output per input, in
// input order, when keeps_order().
class RowPlacingDataset {
 public:
  virtual ~RowPlacingDataset() = default;
  virtual bool keeps_order() const = 0;
};
// Its iterators: the placer is given before the first next() and after every restore()
// the numbering starts again at 0.
class RowPlacingIterator {
 public:
  virtual ~RowPlacingIterator() = default;
  virtual void set_row_placer(std::shared_ptr<RowPlacer> placer) = 0;
};

// The rewrite, fuse_map_and_batch, is declared in dataecho/ops/fusion.h (the spec layer
// applies it).

}  // namespace dataecho
