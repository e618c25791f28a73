// The optimizers: SGD with Nesterov momentum and weight decay (the paper's ResNet
// setting), or AdamW (the usual choice for Transformer language models), with the
// learning-rate schedule of OptimizerConfig (linear warm-up, linear decay over a step
// budget). Thread-safety: one training thread.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "dataecho/train/train_config.h"

namespace dataecho::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> parameters,
                                                        const OptimizerConfig& config);
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace dataecho::train
