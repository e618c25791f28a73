// Example: named tensors plus where they came from.
// Thread-safety: a value type; copies share tensor buffers and row metadata, which are
// immutable, so copies may be read and modified independently on different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataecho/core/tensor.h"

namespace dataecho {

// Provenance of one row: `id` is the source id, stable across runs for the same data
// (a range source's integer; a file source's shard and record index); `echo` is 0 for
// a fresh row and k for its k-th repeat by an echo stage; `epoch` is the pass over the
// source that read it, stamped by `repeat` (0 without one). A fresh read from storage
// is one (id, epoch) pair: its echoed copies share it, a re-read in a later epoch does
// not. The trainer counts fresh examples by these pairs, not by echo indices (a copy
// can be trained on before its echo-0 original leaves a shuffle buffer).
struct RowMeta {
  int64_t id = 0;
  int32_t echo = 0;
  int32_t epoch = 0;
  friend bool operator==(const RowMeta&, const RowMeta&) = default;
};

class Example {
 public:
  using Field = std::pair<std::string, Tensor>;

  Example() = default;
  explicit Example(int64_t id) { single_.id = id; }

  // ---- fields, in insertion order ----
  void set(std::string_view name, Tensor tensor);  // adds or replaces
  const Tensor& get(std::string_view name) const;  // throws kNotFound naming the field
  const Tensor* find(std::string_view name) const;
  bool erase(std::string_view name);
  const std::vector<Field>& fields() const { return fields_; }
  std::vector<Field>& mutable_fields() { return fields_; }
  size_t nbytes() const;  // sum of the tensors' byte sizes
  // Gives every tensor that pins a much larger buffer (Tensor::pins_more_than_itself)
  // a buffer of its own. Operators that hold elements for long (shuffle) call it, so
  // that what they hold is what their buffer size declares.
  void compact();

  // ---- provenance ----
  // An example is one row; a batch (made by `batch`) has one row per element, and its
  // tensors carry a leading batch dimension of that size.
  bool is_batch() const { return rows_ != nullptr; }
  size_t num_rows() const { return rows_ ? rows_->size() : 1; }
  const RowMeta& row(size_t i) const { return rows_ ? (*rows_)[i] : single_; }
  std::vector<RowMeta> rows() const;
  size_t fresh_rows() const;  // rows whose echo index is 0

  // For a single example: its id and echo index. For a batch: those of row 0.
  int64_t id() const { return row(0).id; }
  int32_t echo() const { return row(0).echo; }
  void set_id(int64_t id);
  void set_echo(int32_t echo);

  void set_rows(std::vector<RowMeta> rows);
  // Raises every row's echo index to `echo` plus its own (used for batch echoing).
  void add_echo(int32_t delta);
  // Sets the epoch of every row that has none yet (0): an inner `repeat` has stamped
  // the more specific pass already (nested repeats: see repeat.cc).
  void stamp_epoch(int32_t epoch);

  // A text naming the element for error messages: "id 42" or "batch of ids 3..9".
  std::string describe() const;

 private:
  std::vector<Field> fields_;
  RowMeta single_;
  std::shared_ptr<const std::vector<RowMeta>> rows_;
};

}  // namespace dataecho
