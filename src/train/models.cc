// MLP, small CNN and the CIFAR ResNet family (He et al. 2016, section 4.2), as in the
// paper's ResNet-32 on CIFAR-10 setting, for 1- or 3-channel images of any size.
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/train/model.h"

namespace dataecho::train {
namespace {

namespace nn = torch::nn;

[[noreturn]] void model_error(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "train config", message);
}

class MlpImpl : public ClassifierImpl {
 public:
  MlpImpl(int64_t inputs, int64_t depth, int64_t width, int64_t classes) {
    int64_t prev = inputs;
    for (int64_t i = 0; i < depth; ++i) {
      hidden_.push_back(register_module("fc" + std::to_string(i), nn::Linear(prev, width)));
      prev = width;
    }
    out_ = register_module("out", nn::Linear(prev, classes));
  }
  torch::Tensor forward(const torch::Tensor& images) override {
    torch::Tensor x = images.flatten(1);
    for (auto& fc : hidden_) x = torch::relu(fc->forward(x));
    return out_->forward(x);
  }

 private:
  std::vector<nn::Linear> hidden_;
  nn::Linear out_{nullptr};
};

// `depth` blocks of conv3x3-BN-ReLU-maxpool2, channels doubling from `width`, then a
// linear classifier over the flattened features.
class CnnImpl : public ClassifierImpl {
 public:
  CnnImpl(int64_t channels, int64_t height, int64_t width_px, int64_t depth, int64_t width,
          int64_t classes) {
    int64_t c = channels, h = height, w = width_px;
    for (int64_t i = 0; i < depth; ++i) {
      int64_t out = width << i;
      nn::Sequential block(nn::Conv2d(nn::Conv2dOptions(c, out, 3).padding(1).bias(false)),
                           nn::BatchNorm2d(out), nn::ReLU(), nn::MaxPool2d(2));
      blocks_.push_back(register_module("block" + std::to_string(i), block));
      c = out;
      h /= 2;
      w /= 2;
    }
    fc_ = register_module("fc", nn::Linear(c * h * w, classes));
  }
  torch::Tensor forward(const torch::Tensor& images) override {
    torch::Tensor x = images;
    for (auto& b : blocks_) x = b->forward(x);
    return fc_->forward(x.flatten(1));
  }

 private:
  std::vector<nn::Sequential> blocks_;
  nn::Linear fc_{nullptr};
};

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(out));
    conv2_ =
        register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2_ = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      // Projection shortcut (option B) where the shape changes.
      shortcut_ = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    return torch::relu(y + (shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

// Depth 6n+2: a 3x3 stem, three stages of n basic blocks (w, 2w, 4w channels; the
// second and third halve the resolution), global average pooling, a linear classifier.
class ResNetImpl : public ClassifierImpl {
 public:
  ResNetImpl(int64_t channels, int64_t depth, int64_t width, int64_t classes) {
    int64_t n = (depth - 2) / 6;
    stem_ = register_module(
        "stem",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(channels, width, 3).padding(1).bias(false)),
                       nn::BatchNorm2d(width), nn::ReLU()));
    int64_t in = width;
    for (int64_t stage = 0; stage < 3; ++stage) {
      int64_t out = width << stage;
      for (int64_t i = 0; i < n; ++i) {
        int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
        blocks_.push_back(
            register_module("stage" + std::to_string(stage + 1) + "_" + std::to_string(i),
                            BasicBlock(in, out, stride)));
        in = out;
      }
    }
    fc_ = register_module("fc", nn::Linear(in, classes));
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& images) override {
    torch::Tensor x = stem_->forward(images);
    for (auto& b : blocks_) x = b->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  nn::Sequential stem_{nullptr};
  std::vector<BasicBlock> blocks_;
  nn::Linear fc_{nullptr};
};

}  // namespace

Classifier make_model(const ModelConfig& config, int64_t channels, int64_t height, int64_t width) {
  int64_t depth = config.resolved_depth();
  int64_t w = config.resolved_width();
  if (config.in_channels > 0 && config.in_channels != channels) {
    model_error("the model takes " + std::to_string(config.in_channels) +
                "-channel images but the data has " + std::to_string(channels) + " channels");
  }
  if (config.kind == "mlp") {
    return std::make_shared<MlpImpl>(channels * height * width, depth, w, config.num_classes);
  }
  if (config.kind == "cnn") {
    if (depth > 8) model_error("cnn depth must be <= 8, got " + std::to_string(depth));
    if ((height >> depth) < 1 || (width >> depth) < 1) {
      model_error("a cnn of depth " + std::to_string(depth) + " needs images of at least " +
                  std::to_string(1 << depth) + "x" + std::to_string(1 << depth) + ", got " +
                  std::to_string(height) + "x" + std::to_string(width));
    }
    return std::make_shared<CnnImpl>(channels, height, width, depth, w, config.num_classes);
  }
  if (config.kind == "resnet") {
    if (depth < 8 || (depth - 2) % 6 != 0) {
      model_error("resnet depth must be 6n+2 with n >= 1 (8, 14, 20, 32, ...), got " +
                  std::to_string(depth));
    }
    if (height < 4 || width < 4) model_error("a resnet needs images of at least 4x4");
    return std::make_shared<ResNetImpl>(channels, depth, w, config.num_classes);
  }
  if (config.language_model())
    model_error("the transformer takes token blocks (pack's tokens and document), not images");
  model_error("unknown model \"" + config.kind + "\" (known: mlp, cnn, resnet, transformer)");
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace dataecho::train
