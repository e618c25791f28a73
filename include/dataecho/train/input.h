// What a batch must look like to feed a model, checked once before training so that a
// spec whose fields do not match fails with a clear message instead of deep in LibTorch.
// Thread-safety: plain functions on values.
#pragma once

#include <string>

#include "dataecho/core/example.h"
#include "dataecho/train/train_config.h"

namespace dataecho::train {

// The representation of one pipeline's batches.
struct InputSignature {
  DType dtype = DType::kUInt8;  // kUInt8 (HWC or HW) or kFloat32 (CHW or HW)
  Shape row_shape;              // the image field's shape without the batch dimension
  int64_t channels = 0, height = 0, width = 0;
  // Token blocks (a language model): dtype int32 or int64, row_shape [block length];
  // whether the batches carry a document field.
  bool tokens = false;
  bool document = false;

  bool same_as(const InputSignature& o) const {
    return dtype == o.dtype && row_shape == o.row_shape && tokens == o.tokens &&
           document == o.document;
  }
  // "uint8 [28, 28, 1] (HWC: 1x28x28)", "int32 [129] token blocks with documents"
  std::string describe() const;
};

// Checks a batch from pipeline `what` ("training pipeline") and returns its signature.
// Throws kInvalidArgument naming the pipeline, the field and what was expected.
InputSignature inspect_batch(const Example& batch, const InputOptions& input,
                             const std::string& what);

// The same for a language model's batches: `input.tokens_field`, int32 or int64 [N, L]
// with L >= 2, and, unless `input.document_field` is "", that field, int32 or int64
// [N, L] (as `pack` gives them, batched).
InputSignature inspect_token_batch(const Example& batch, const InputOptions& input,
                                   const std::string& what);

}  // namespace dataecho::train
