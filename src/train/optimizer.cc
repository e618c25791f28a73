#include "dataecho/train/optimizer.h"

namespace dataecho::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> parameters,
                                                        const OptimizerConfig& config) {
  if (config.kind == "adamw") {
    torch::optim::AdamWOptions options(config.lr);
    options.betas({0.9, config.beta2}).weight_decay(config.weight_decay);
    return std::make_unique<torch::optim::AdamW>(std::move(parameters), options);
  }
  torch::optim::SGDOptions options(config.lr);
  options.momentum(config.momentum).nesterov(config.nesterov).weight_decay(config.weight_decay);
  return std::make_unique<torch::optim::SGD>(std::move(parameters), options);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace dataecho::train
