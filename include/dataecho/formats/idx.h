// IDX files (the MNIST family: MNIST, Fashion-MNIST, KMNIST...), gzipped or not.
//
// The `idx` source pairs an images file (type ubyte, dims [N, H, W] or [N, H, W, C])
// with an optional labels file (any integer type, dims [N]) and yields, for index i,
// an Example with id i, field "image" = uint8 [H, W, C] (C = 1 for [N, H, W]) and
// field "label" = int64 scalar. Buffers: both files are decompressed once into memory
// (Fashion-MNIST train: 47 MB) when the first iterator starts, shared by all
// iterators; the image tensors are zero-copy views of that buffer.
// Errors: a wrong magic, a type or rank it cannot use, or image and label counts that
// differ are found when the dataset is made (at spec build); a truncated file when its
// data is loaded. Every error names the file. Thread-safe: the dataset is immutable
// (its lazy load is guarded); one consumer per iterator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/core/tensor.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

struct IdxOptions {
  std::string images;  // path or URL of the images file (required)
  std::string labels;  // path or URL of the labels file; "" = no "label" field
  int64_t limit = -1;  // only the first `limit` examples (-1 = all)
  // kFail: a truncated file is an error. kSkip/kEcho: the complete examples are kept
  // and the rest is counted in stats counter "bytes_lost".
  OnError on_error = OnError::kFail;
  StreamOptions stream;
};

DatasetPtr make_idx_source(const IdxOptions& options);

// One IDX file in memory.
struct IdxArray {
  std::string uri;
  uint8_t type = 0x08;  // 0x08 ubyte, 0x09 sbyte, 0x0B int16, 0x0C int32, 0x0D float, 0x0E double
  std::vector<int64_t> dims;     // dims[0] = number of items
  std::shared_ptr<Buffer> data;  // dims product * element size bytes, big-endian as in the file
  int64_t complete_items = 0;    // items fully present (less than dims[0] only if truncated)
};

// Reads the header (magic, type, dims) only.
IdxArray read_idx_header(const std::string& uri, const StreamOptions& options = {});
// Reads the whole file. `allow_truncated`: a short file gives the complete items
// instead of an error.
IdxArray read_idx_file(const std::string& uri, const StreamOptions& options = {},
                       bool allow_truncated = false);

}  // namespace dataecho
