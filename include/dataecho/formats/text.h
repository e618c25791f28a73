// The `text` source: the lines, or documents split by a separator, of text files, or
// the objects of JSON Lines files (docs/text.md).
//
// Files are read through open_stream (local paths, file:// and http(s) URLs, with the
// spec's brace ranges, globs and @manifests expanded by expand_uris); a file that starts
// with the gzip magic is inflated (gzip, and dictzip, which is gzip with an index in its
// header). Each file is one shard (for `interleave` and file-level `shard`).
//
// Records: the bytes between separators (default "\n"; a "\r" before a "\n" separator
// is dropped); the last record needs no separator after it; empty records are skipped
// unless `keep_empty`. Each record is one Example whose id is (file index << 40) | the
// byte offset of its first byte in the (decompressed) file: stable across runs.
//   lines:  field "text", the record's bytes as uint8 [n].
//   jsonl:  each record is a JSON object; each of its keys (or only those of `fields`,
//           each required) becomes a field: a string as uint8 bytes, an integer as an
//           int64 scalar, any other number as a float64 scalar, a boolean as a uint8
//           scalar, a list of integers as int64 [n], a list of numbers as float64 [n].
// Bad records follow `on_error` (on_error.h): a record longer than `max_bytes` (it is
// skipped without being held), one that is not valid UTF-8 (when `utf8`), a JSON Lines
// record that is not a JSON object, lacks a field or holds a value of another kind.
// An empty file gives no elements. Errors name the file, the record's index (from 0)
// and byte offset, its line (from 1) when the separator is "\n", and the reason.
// Holds a read chunk of 64 KiB (and a gzip file's 256 KiB input chunk and inflate
// window) and one record of at most `max_bytes`; no threads.
// Save/restore: the file, the byte offset of the next record and the bad-record
// policy's state; an uncompressed file is sought to the offset, a compressed one read
// up to it again.
// Record index (Dataset::record_index): each record's first byte (empty and over-long
// records included), found by a read of the file; a gzip file has none, and a record
// range of one starts at record 0 only.
// Thread-safety: the dataset is immutable; one consumer per iterator.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

struct TextOptions {
  std::vector<std::string> uris;
  enum class Format { kLines, kJsonLines } format = Format::kLines;
  std::string separator = "\n";  // not empty
  int64_t max_bytes = 1 << 20;   // a longer record is a bad record
  bool utf8 = true;              // invalid UTF-8 is a bad record
  bool keep_empty = false;
  // jsonl: field name -> JSON key, each required; empty: every key of each object.
  std::vector<std::pair<std::string, std::string>> fields;
  OnError on_error = OnError::kFail;
  StreamOptions stream;
};

DatasetPtr make_text_source(const TextOptions& options);

// Whether `bytes` are valid UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF); when not, `error_at` (if given) is the offset of the first bad byte.
bool valid_utf8(std::string_view bytes, size_t* error_at = nullptr);

}  // namespace dataecho
