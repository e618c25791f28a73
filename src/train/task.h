// What the trainer trains a model to do, behind one interface: classify images (the mlp,
// cnn and resnet kinds: cross-entropy per example) or model language (the transformer:
// next-token cross-entropy per target token, over `pack`'s blocks). The trainer's loop,
// counts, clocks, checkpoints and data-parallel steps are the same for both; only the
// batches' fields, the model and the loss differ. Thread-safety: const methods on one
// training thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataecho/train/input.h"
#include "dataecho/train/model.h"
#include "dataecho/train/torch_batch.h"
#include "run_io.h"

namespace dataecho::train {

// An evaluation's sums over batches: the loss summed over its units (examples, or target
// tokens for a language model), the units predicted right (the class, the next token),
// and the units.
struct EvalSums {
  double loss = 0;
  int64_t correct = 0;
  int64_t units = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  // Checks a batch of pipeline `what` ("training pipeline") and returns its signature;
  // throws kInvalidArgument naming the pipeline, the field and what was expected.
  virtual InputSignature inspect(const Example& batch, const std::string& what) const = 0;
  virtual TorchBatch to_torch(const Example& batch, const InputSignature& sig) const = 0;
  // Refuses values the model cannot take: labels outside the classes, token ids outside
  // the vocabulary.
  virtual void check(const TorchBatch& batch, const std::string& what) const = 0;
  // The model for the training pipeline's signature; throws when they do not fit.
  virtual Classifier make_model(const InputSignature& sig) const = 0;
  // The batch's mean loss (over examples, or over target tokens), for backward.
  virtual torch::Tensor loss(ClassifierImpl& model, const TorchBatch& batch) const = 0;
  virtual EvalSums evaluate(ClassifierImpl& model, const TorchBatch& batch) const = 0;
  // True when an evaluation's units are tokens (EvalRecord::tokens, bits per byte).
  virtual bool per_token() const = 0;
  // The sequences whose pieces a training batch holds, one read per piece: id, epoch and
  // which copy of that read it is (0 for the first; echoing before `pack` and echoing
  // blocks after it make the others), when the batch says (the language model's blocks
  // with `pack`'s ids, epochs and echoes fields): the trainer then counts fresh
  // sequences, not rows. False: count rows.
  virtual bool sequence_reads(const Example& batch, std::vector<run_io::ReadKey>& out) const {
    (void)batch;
    (void)out;
    return false;
  }
};

std::unique_ptr<Task> make_task(const TrainConfig& config);

}  // namespace dataecho::train
