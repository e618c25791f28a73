// padded_batch and unbatch: batches of variable-length elements, and batches back into
// elements (docs/text.md).
//
// padded_batch groups `size` consecutive elements into one batch, as `batch` does, but a
// padded field may differ in its first dimension from element to element: each row is
// copied to the front of its slot and the rest of the slot is filled with the field's
// pad value. The slot length is the batch's longest (the default), a fixed length, or
// the longest rounded up to a multiple of k. Every other dimension, and every field that
// is not padded, must be equal across the batch (an error names the field, both shapes
// and both element ids). Each padded field `f` adds an int32 field `f_length` [rows]
// holding each row's length before padding. Without `fields`, every field of rank >= 1
// is padded to the longest with 0; with `fields`, those alone (the others must match).
// Holds the `size` elements of the batch being filled (their tensors, not copies) and
// then the batch; no threads. Stats: "fresh_rows", "duplicate_rows" (as `batch`),
// "pad_elements" (values written as padding) and "value_elements" (values copied).
//
// unbatch splits each batch into its rows, each keeping its row's id, echo index and
// epoch. A field `f` with a field `f_length` beside it is cut to that length (padding
// off) and `f_length` is dropped, so unbatch(padded_batch(x)) == x. A row is a view of
// the batch's buffer (no copy); `shuffle` compacts what it holds. Holds one batch.
// Both save their position and restore it: padded_batch holds nothing between calls;
// unbatch writes the batch it is splitting and the next row.
#pragma once

#include <string>
#include <vector>

#include "dataecho/core/dataset.h"

namespace dataecho {

// How one field is padded.
struct PadField {
  std::string name = "";
  enum class To { kLongest, kFixed, kMultiple } to = To::kLongest;
  int64_t length = 0;     // kFixed: the slot length; kMultiple: k
  double value = 0;       // the pad value, converted to the field's dtype
  bool truncate = false;  // kFixed: cut longer rows (otherwise they are an error)
};

struct PadOptions {
  // Empty: every field of rank >= 1, to the longest, with 0.
  std::vector<PadField> fields{};
  bool lengths = true;  // add `<field>_length` for each padded field
};

struct PaddedBatchOptions {
  int64_t size = 32;
  bool drop_remainder = false;
  PadOptions pad{};
};
DatasetPtr make_padded_batch(DatasetPtr input, const PaddedBatchOptions& options);

// Collates `elements` (single rows, at least one) into one padded batch; `stage` names
// the node in errors. `pad_elements` and `value_elements` (when not null) add the counts.
Example pad_and_collate(const std::vector<Example>& elements, const PadOptions& options,
                        const std::string& stage, int64_t* pad_elements = nullptr,
                        int64_t* value_elements = nullptr);

DatasetPtr make_unbatch(DatasetPtr input);

}  // namespace dataecho
