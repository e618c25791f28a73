#include "dataecho/train/optimizer.h"

namespace dataecho::train {

std::unique_ptr<torch::optim::SGD> make_optimizer(std::vector<torch::Tensor> parameters,
                                                  const OptimizerConfig& config) {
  torch::optim::SGDOptions options(config.lr);
  options.momentum(config.momentum).nesterov(config.nesterov).weight_decay(config.weight_decay);
  return std::make_unique<torch::optim::SGD>(std::move(parameters), options);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
  }
}

}  // namespace dataecho::train
