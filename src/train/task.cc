#include "task.h"

#include <algorithm>

#include "dataecho/core/error.h"
#include "dataecho/ops/pack.h"

namespace dataecho::train {
namespace {

namespace F = torch::nn::functional;

[[noreturn]] void fail(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "train", message);
}

class Classification : public Task {
 public:
  explicit Classification(const TrainConfig& c) : c_(c) {}
  InputSignature inspect(const Example& batch, const std::string& what) const override {
    return inspect_batch(batch, c_.input, what);
  }
  TorchBatch to_torch(const Example& batch, const InputSignature& sig) const override {
    return batch_to_torch(batch, c_.input, sig);
  }
  void check(const TorchBatch& b, const std::string& what) const override {
    if (b.rows == 0) return;
    const int64_t lo = b.labels.min().item<int64_t>(), hi = b.labels.max().item<int64_t>();
    const int64_t classes = c_.model.num_classes;
    if (lo < 0 || hi >= classes) {
      fail(what + ": label " + std::to_string(lo < 0 ? lo : hi) + " is outside [0, " +
           std::to_string(classes) + "); set model.num_classes to the number of classes");
    }
  }
  Classifier make_model(const InputSignature& sig) const override {
    return train::make_model(c_.model, sig.channels, sig.height, sig.width);
  }
  torch::Tensor loss(ClassifierImpl& model, const TorchBatch& b) const override {
    return F::cross_entropy(model.forward(b.images), b.labels);
  }
  EvalSums evaluate(ClassifierImpl& model, const TorchBatch& b) const override {
    torch::Tensor logits = model.forward(b.images);
    EvalSums s;
    s.loss = F::cross_entropy(logits, b.labels, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                 .item<double>();
    s.correct = logits.argmax(1).eq(b.labels).sum().item<int64_t>();
    s.units = b.rows;
    return s;
  }
  bool per_token() const override { return false; }

 private:
  const TrainConfig& c_;
};

// Next-token prediction on blocks of L tokens: the inputs are tokens 0..L-2, the targets
// tokens 1..L-1; a target on padding (document -1) is not scored. The loss is the mean
// cross-entropy in nats per target token; with byte tokens (tokenize's "bytes": one token
// per byte of the text, the end-of-sequence token standing for the line's newline) that
// divided by ln 2 is bits per byte.
class LanguageModeling : public Task {
 public:
  explicit LanguageModeling(const TrainConfig& c) : c_(c) {}
  InputSignature inspect(const Example& batch, const std::string& what) const override {
    return inspect_token_batch(batch, c_.input, what);
  }
  TorchBatch to_torch(const Example& batch, const InputSignature& sig) const override {
    return token_batch_to_torch(batch, c_.input, sig);
  }
  void check(const TorchBatch& b, const std::string& what) const override {
    if (b.rows == 0) return;
    const int64_t lo = b.tokens.min().item<int64_t>(), hi = b.tokens.max().item<int64_t>();
    const int64_t vocab = c_.model.vocab_size;
    if (lo < 0 || hi >= vocab) {
      fail(what + ": token id " + std::to_string(lo < 0 ? lo : hi) + " is outside [0, " +
           std::to_string(vocab) +
           "); set model.vocab_size to the tokenizer's vocabulary (257 for tokenize's \"bytes\")");
    }
  }
  Classifier make_model(const InputSignature& sig) const override {
    const int64_t block = sig.row_shape.at(0);
    const int64_t context = c_.model.context > 0 ? c_.model.context : block - 1;
    if (block != context + 1) {
      fail("training pipeline: its blocks hold " + std::to_string(block) +
           " tokens, and a language model of context " + std::to_string(context) +
           " needs blocks of context + 1 = " + std::to_string(context + 1) +
           " (pack's length; inputs and targets are the block shifted by one)");
    }
    return make_language_model(c_.model, context);
  }
  torch::Tensor loss(ClassifierImpl& model, const TorchBatch& b) const override {
    Scored s = score(model, b);
    return s.loss_sum / s.count.clamp_min(1);
  }
  EvalSums evaluate(ClassifierImpl& model, const TorchBatch& b) const override {
    Scored s = score(model, b);
    EvalSums e;
    e.loss = s.loss_sum.item<double>();
    e.correct = s.logits.argmax(-1).eq(s.targets).sum().item<int64_t>();
    e.units = s.count.item<int64_t>();
    return e;
  }
  bool per_token() const override { return true; }
  bool sequence_reads(const Example& batch, std::vector<run_io::ReadKey>& out) const override {
    const Tensor* ids = batch.find(kPackIdsField);
    const Tensor* epochs = batch.find(kPackEpochsField);
    const Tensor* echoes = batch.find(kPackEchoesField);
    const Tensor* doc = batch.find(c_.input.document_field);
    if (!ids || !epochs || !echoes || !doc || !batch.is_batch()) return false;
    const int64_t rows = static_cast<int64_t>(batch.num_rows());
    const Shape k_shape = ids->shape();
    if (ids->dtype() != DType::kInt64 || epochs->dtype() != DType::kInt32 ||
        echoes->dtype() != DType::kInt32 || doc->dtype() != DType::kInt32 || k_shape.size() != 2 ||
        k_shape[0] != rows || epochs->shape() != k_shape || echoes->shape() != k_shape ||
        doc->rank() != 2 || doc->shape()[0] != rows)
      fail("training pipeline: pack's fields ids (int64), epochs, echoes and " +
           c_.input.document_field + " (int32) should be [rows, k] and [rows, length]; got " +
           shape_to_string(k_shape) + ", " + shape_to_string(epochs->shape()) + ", " +
           shape_to_string(echoes->shape()) + ", " + shape_to_string(doc->shape()) + " (" +
           batch.describe() + ")");
    const int64_t k_max = k_shape[1], length = doc->shape()[1];
    out.clear();
    for (int64_t r = 0; r < rows; ++r) {
      // The block's sequences: its document indices run 0..k-1 (-1 on padding).
      const int32_t* d = doc->data<int32_t>() + r * length;
      const int64_t k = *std::max_element(d, d + length) + 1;
      if (k > k_max)
        fail("training pipeline: a block has " + std::to_string(k) + " documents but " +
             std::to_string(k_max) + " ids (" + batch.describe() + ")");
      const int64_t* id = ids->data<int64_t>() + r * k_max;
      const int32_t* ep = epochs->data<int32_t>() + r * k_max;
      const int32_t* ec = echoes->data<int32_t>() + r * k_max;
      // Echoes of the whole block (after pack, or of the batch) add to the row's echo
      // index beyond its sequences' smallest (which pack gave the block).
      const int32_t block_echo =
          k > 0
              ? std::max(0, batch.row(static_cast<size_t>(r)).echo - *std::min_element(ec, ec + k))
              : 0;
      for (int64_t j = 0; j < k; ++j) out.push_back({id[j], ep[j], ec[j] + (block_echo << 16)});
    }
    return true;
  }

 private:
  struct Scored {
    torch::Tensor logits, targets, loss_sum, count;
  };
  Scored score(ClassifierImpl& model, const TorchBatch& b) const {
    const int64_t len = b.tokens.size(1);
    auto& lm = dynamic_cast<LanguageModelImpl&>(model);
    torch::Tensor inputs = b.tokens.slice(1, 0, len - 1);
    Scored s;
    s.targets = b.tokens.slice(1, 1, len);
    if (b.document.defined()) {
      s.logits = lm.forward_masked(inputs, b.document.slice(1, 0, len - 1));
      // Padding is not a target (its ignore index never matches an argmax either).
      s.targets = s.targets.masked_fill(b.document.slice(1, 1, len).lt(0), -100);
    } else {
      s.logits = lm.forward(inputs);
    }
    s.loss_sum =
        F::cross_entropy(s.logits.reshape({-1, s.logits.size(-1)}), s.targets.reshape({-1}),
                         F::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(-100));
    s.count = s.targets.ne(-100).sum();
    return s;
  }

  const TrainConfig& c_;
};

}  // namespace

std::unique_ptr<Task> make_task(const TrainConfig& config) {
  if (config.model.language_model()) return std::make_unique<LanguageModeling>(config);
  return std::make_unique<Classification>(config);
}

}  // namespace dataecho::train
