// The models: an MLP and a small CNN for fast runs, and the ResNet family for small
// images of the paper's CIFAR-10 setting (He et al. 2016: depth 6n+2, three stages of n
// basic blocks with w, 2w and 4w channels). Each maps float images [N,C,H,W] to logits
// [N,num_classes]. Thread-safety: as torch::nn::Module (one training thread).
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

// A model for images of `channels` x `height` x `width`. Throws dataecho::Error
// (kInvalidArgument) for an unknown kind, a ResNet depth that is not 6n+2, or an input
// the model cannot take (a CNN on images smaller than 4x4).
Classifier make_model(const ModelConfig& config, int64_t channels, int64_t height, int64_t width);

int64_t count_parameters(const torch::nn::Module& model);

}  // namespace dataecho::train
