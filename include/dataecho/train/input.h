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

  bool same_as(const InputSignature& o) const {
    return dtype == o.dtype && row_shape == o.row_shape;
  }
  std::string describe() const;  // "uint8 [28, 28, 1] (HWC: 1x28x28)"
};

// Checks a batch from pipeline `what` ("training pipeline") and returns its signature.
// Throws kInvalidArgument naming the pipeline, the field and what was expected.
InputSignature inspect_batch(const Example& batch, const InputOptions& input,
                             const std::string& what);

}  // namespace dataecho::train
