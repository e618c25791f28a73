// Batches into LibTorch tensors without a copy: torch::from_blob over the batch's
// buffer, with a deleter that owns a reference to it, so the torch tensor keeps the
// pipeline's buffer alive and nothing is memcpy'd. uint8 HWC images become float NCHW
// in torch (one pass: the conversion to float is the only copy, which a model needs anyway).
// Thread-safety: plain functions.
#pragma once

#include <torch/torch.h>

#include "dataecho/core/example.h"
#include "dataecho/train/input.h"

namespace dataecho::train {

// A torch view of `tensor`'s bytes (same dtype and shape, no copy). Tensors stored
// inline (scalars) have no buffer and are copied.
torch::Tensor to_torch(const Tensor& tensor);

struct TorchBatch {
  torch::Tensor images;  // float32 [N,C,H,W], contiguous
  torch::Tensor labels;  // int64 [N]
  // A language model's instead: int64 [N, L] token blocks (inputs the first L-1 tokens,
  // targets the last L-1) and their document indices (-1 on padding; undefined when the
  // batches have no document field).
  torch::Tensor tokens;
  torch::Tensor document;
  int64_t rows = 0;
  int64_t fresh = 0;
};

// `signature` is what inspect_batch returned for this pipeline.
TorchBatch batch_to_torch(const Example& batch, const InputOptions& input,
                          const InputSignature& signature);
// A language model's batch (inspect_token_batch's signature): int64 copies of the tokens
// and document indices (an int64 field is viewed without a copy).
TorchBatch token_batch_to_torch(const Example& batch, const InputOptions& input,
                                const InputSignature& signature);

}  // namespace dataecho::train
