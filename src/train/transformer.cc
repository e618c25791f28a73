// The causal Transformer language model (GPT-2's layout, without dropout): pre-norm
// blocks, learned absolute positions, the output layer tied to the token embedding.
// LibTorch 1.13 has no fused attention (scaled_dot_product_attention came with 2.0):
// attention is written out as softmax(q k^T / sqrt(d) + mask) v.
#include <cmath>
#include <limits>
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/train/model.h"

namespace dataecho::train {
namespace {

namespace nn = torch::nn;

[[noreturn]] void model_error(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "train config", message);
}

class BlockImpl : public nn::Module {
 public:
  BlockImpl(int64_t width, int64_t heads) : heads_(heads) {
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({width})));
    qkv_ = register_module("qkv", nn::Linear(width, 3 * width));
    proj_ = register_module("proj", nn::Linear(width, width));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({width})));
    fc_ = register_module("fc", nn::Linear(width, 4 * width));
    out_ = register_module("out", nn::Linear(4 * width, width));
  }
  // `allowed`: bool [N or 1, 1, T, T], true where query i may attend to key j.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& allowed) {
    const int64_t n = x.size(0), t = x.size(1), w = x.size(2), d = w / heads_;
    // [N,T,3,H,D] -> three [N,H,T,D]
    torch::Tensor qkv = qkv_->forward(ln1_->forward(x)).view({n, t, 3, heads_, d});
    qkv = qkv.permute({2, 0, 3, 1, 4});
    torch::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
    torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(d)));
    att = att.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    torch::Tensor y = torch::matmul(torch::softmax(att, -1), v);  // [N,H,T,D]
    y = y.transpose(1, 2).reshape({n, t, w});
    torch::Tensor h = x + proj_->forward(y);
    return h + out_->forward(torch::gelu(fc_->forward(ln2_->forward(h))));
  }
  // The layers that write into the residual stream (scaled at initialization).
  std::vector<nn::Linear> residual_outputs() { return {proj_, out_}; }

 private:
  int64_t heads_;
  nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  nn::Linear qkv_{nullptr}, proj_{nullptr}, fc_{nullptr}, out_{nullptr};
};
TORCH_MODULE(Block);

class TransformerImpl : public LanguageModelImpl {
 public:
  TransformerImpl(int64_t vocab, int64_t context, int64_t depth, int64_t width, int64_t heads)
      : context_(context) {
    tokens_ = register_module("tokens", nn::Embedding(vocab, width));
    positions_ = register_module("positions", nn::Embedding(context, width));
    for (int64_t i = 0; i < depth; ++i)
      blocks_.push_back(register_module("block" + std::to_string(i), Block(width, heads)));
    ln_ = register_module("ln", nn::LayerNorm(nn::LayerNormOptions({width})));
    initialize(depth);
  }

  torch::Tensor forward(const torch::Tensor& tokens) override {
    const int64_t t = tokens.size(1);
    return run(tokens, torch::ones({t, t}, torch::kBool).tril().view({1, 1, t, t}));
  }

  torch::Tensor forward_masked(const torch::Tensor& tokens,
                               const torch::Tensor& document) override {
    const int64_t t = tokens.size(1);
    torch::Tensor causal = torch::ones({t, t}, torch::kBool).tril().view({1, 1, t, t});
    torch::Tensor same = document.unsqueeze(2).eq(document.unsqueeze(1)).unsqueeze(1);
    return run(tokens, same.logical_and(causal));
  }

 private:
  torch::Tensor run(const torch::Tensor& tokens, const torch::Tensor& allowed) {
    const int64_t t = tokens.size(1);
    if (t > context_) {
      throw Error(ErrorCode::kInvalidArgument, "train",
                  "the language model sees " + std::to_string(context_) + " tokens and was given " +
                      std::to_string(t));
    }
    torch::Tensor x = tokens_->forward(tokens) + positions_->weight.slice(0, 0, t).unsqueeze(0);
    for (auto& b : blocks_) x = b->forward(x, allowed);
    // Tied output: the logits are the final states against the token embedding.
    return torch::matmul(ln_->forward(x), tokens_->weight.t());
  }

  // GPT-2's: normal(0, 0.02) weights, zero biases, and the layers that write into the
  // residual stream scaled by 1/sqrt(2 depth) so that its variance does not grow with depth.
  void initialize(int64_t depth) {
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* l = m->as<nn::Linear>()) {
        nn::init::normal_(l->weight, 0.0, 0.02);
        nn::init::zeros_(l->bias);
      } else if (auto* e = m->as<nn::Embedding>()) {
        nn::init::normal_(e->weight, 0.0, 0.02);
      }
    }
    const double scaled = 0.02 / std::sqrt(2.0 * static_cast<double>(depth));
    for (auto& b : blocks_)
      for (auto& l : b->residual_outputs()) nn::init::normal_(l->weight, 0.0, scaled);
  }

  int64_t context_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr};
  std::vector<Block> blocks_;
  nn::LayerNorm ln_{nullptr};
};

}  // namespace

Classifier make_language_model(const ModelConfig& config, int64_t context) {
  const int64_t width = config.resolved_width(), depth = config.resolved_depth();
  if (config.heads < 1 || width % config.heads != 0) {
    model_error("transformer width " + std::to_string(width) + " is not a multiple of heads " +
                std::to_string(config.heads));
  }
  if (context < 1) model_error("transformer context must be >= 1, got " + std::to_string(context));
  if (config.vocab_size < 2)
    model_error("transformer vocab_size must be >= 2, got " + std::to_string(config.vocab_size));
  return std::make_shared<TransformerImpl>(config.vocab_size, context, depth, width, config.heads);
}

}  // namespace dataecho::train
