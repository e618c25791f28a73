// pack: token sequences concatenated into blocks of a fixed length, for language-model
// training without padding (docs/text.md).
//
// Each input element's `field` (int32 [n], as `tokenize` gives it) is appended to the
// block being filled, followed by `eos_id` when one is given and the sequence does not
// end with it already. A block that is full is emitted; the rest of the sequence
// carries over into the next block. Each block is one element with:
//   `field`               int32 [length]: the tokens;
//   `document_field`      int32 [length]: per token, which sequence of the block it is
//                         from (0, 1, ...; a sequence carried over from the previous
//                         block is 0 here); -1 on padding. A trainer builds a
//                         block-diagonal attention mask from it, or resets positions
//                         where it changes;
//   `ids_field`           int64 [k]: the source ids of the k sequences in the block;
//   `epochs_field`        int32 [k], when named: their epochs (as `repeat` stamped them);
//   `echoes_field`        int32 [k], when named: their echo indices (0: not a repeat).
//                         With the ids, the reads a block holds: the trainer counts
//                         fresh sequences by (id, epoch) whichever block a piece of one
//                         comes in, when they are named "epochs" and "echoes".
// The other fields of the input are dropped. A block's id is its index in the stream
// (0, 1, ...); its echo index is the smallest of its sequences' (an echoed block
// when every token in it is a repeat), its epoch the first sequence's.
// At the end the last, partial block is padded with `pad_id` (document -1), or dropped
// with `drop_remainder`.
// Holds the block being filled (length tokens) and the one input element being split;
// no threads. Save/restore: that element, how much of it is used, and the block count
// (a pipeline saved mid-block, or mid-sequence, continues identically). Stats:
// "sequences" (inputs read), "tokens" (tokens emitted, padding excluded) and
// "pad_tokens".
#pragma once

#include <optional>
#include <string>

#include "dataecho/core/dataset.h"

namespace dataecho {

// The names the builder's pack(reads) gives the ids, epochs and echoes fields, which the
// trainer reads to count fresh sequences (docs/train.md).
inline constexpr const char* kPackIdsField = "ids";
inline constexpr const char* kPackEpochsField = "epochs";
inline constexpr const char* kPackEchoesField = "echoes";

struct PackOptions {
  int64_t length = 0;  // required, >= 1
  std::string field = "tokens";
  std::string document_field = "document";
  std::string ids_field = kPackIdsField;
  std::string epochs_field = "";                 // "": not written
  std::string echoes_field = "";                 // "": not written
  std::optional<int32_t> eos_id = std::nullopt;  // appended after each sequence that lacks it
  int32_t pad_id = 0;
  bool drop_remainder = false;
};
DatasetPtr make_pack(DatasetPtr input, const PackOptions& options);

}  // namespace dataecho
