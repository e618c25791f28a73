// The models: an MLP and a small CNN for fast runs, and the ResNet family for small
// images of the paper's CIFAR-10 setting (He et al. 2016: depth 6n+2, three stages of n
// basic blocks with w, 2w and 4w channels). Each maps float images [N,C,H,W] to logits
// [N,num_classes]. And a causal Transformer language model (kind "transformer"), which
// maps tokens [N,T] to next-token logits [N,T,vocab]. Thread-safety: as
// torch::nn::Module (one training thread).
#pragma once

#include <memory>

#include <torch/torch.h>

#include "dataecho/train/train_config.h"

namespace dataecho::train {

class ClassifierImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& images) = 0;
};
using Classifier = std::shared_ptr<ClassifierImpl>;

// The language model (transformer.cc): token and learned position embeddings, `depth`
// pre-norm blocks (LayerNorm, multi-head self-attention, LayerNorm, a GELU MLP of 4x
// width), a final LayerNorm and an output layer tied to the token embedding.
// forward(tokens) masks causally only; forward_masked also keeps each token to the
// earlier tokens of its own document (`pack`'s document field, int64 [N,T]): token i
// attends to token j when j <= i and document[j] == document[i].
class LanguageModelImpl : public ClassifierImpl {
 public:
  virtual torch::Tensor forward_masked(const torch::Tensor& tokens,
                                       const torch::Tensor& document) = 0;
};

// A language model for `config` (width, depth, heads, vocab_size) that sees up to
// `context` tokens. Throws dataecho::Error (kInvalidArgument) for a width that is not a
// multiple of heads or a context < 1.
Classifier make_language_model(const ModelConfig& config, int64_t context);

// A model for images of `channels` x `height` x `width`. Throws dataecho::Error
// (kInvalidArgument) for an unknown kind, a ResNet depth that is not 6n+2, or an input
// the model cannot take (a CNN on images smaller than 4x4).
Classifier make_model(const ModelConfig& config, int64_t channels, int64_t height, int64_t width);

int64_t count_parameters(const torch::nn::Module& model);

}  // namespace dataecho::train
