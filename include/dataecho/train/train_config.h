// TrainConfig: everything one training run needs (pipelines, model, optimizer, target,
// budgets), with defaults that work, loadable from a JSON file. No LibTorch in this
// header, so that the command-line tool and the experiment runner stay cheap to compile.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/pipeline.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho::train {

class Collective;  // dataecho/train/distributed.h

// Which fields of a batch feed the model, and how uint8 images are scaled.
struct InputOptions {
  std::string image_field = "image";  // uint8 [N,H,W,C] / [N,H,W] or float32 [N,C,H,W] / [N,H,W]
  std::string label_field = "label";  // int64 (or int32) [N]
  // The language model (model kind "transformer"): blocks of tokens as `pack` gives them,
  // int32 (or int64) [N, context+1], and per token its document index within the block,
  // int32 [N, context+1], -1 on padding ("" for none: a causal mask only).
  std::string tokens_field = "tokens";
  std::string document_field = "document";
  // For uint8 images only: x/255, then (x - mean[c]) / std[c] when given (one value per
  // channel, or one for all). float32 images are taken as they are (already normalized).
  std::vector<double> mean;
  std::vector<double> std;
};

struct ModelConfig {
  std::string kind = "mlp";  // mlp | cnn | resnet | transformer
  // mlp: hidden layers (default 2); cnn: conv blocks (default 2); resnet: 6n+2 (default 20);
  // transformer: blocks (default 2).
  int64_t depth = 0;
  // mlp: hidden units (default 256); cnn: channels of the first block (default 32);
  // resnet: channels of the first stage (default 16; the stages have w, 2w, 4w);
  // transformer: the model width (default 128; a multiple of heads).
  int64_t width = 0;
  int64_t num_classes = 10;
  // The image channels the model expects; 0: whatever the training data has. When set,
  // data with another channel count is refused before training.
  int64_t in_channels = 0;
  // transformer only: attention heads; the tokens it sees (0: the data's blocks less one;
  // the training blocks must hold context + 1 tokens, inputs and targets shifted by one);
  // the vocabulary (257: tokenize's "bytes", ids 0-255 and end of sequence 256).
  int64_t heads = 4;
  int64_t context = 0;
  int64_t vocab_size = 257;

  int64_t resolved_depth() const;
  int64_t resolved_width() const;
  bool language_model() const { return kind == "transformer"; }
};
// Names of the model kinds make_model knows.
const std::vector<std::string>& model_kinds();

// SGD with Nesterov momentum and weight decay, or AdamW (kind "adamw": betas 0.9 and
// beta2, decoupled weight decay; momentum and nesterov unused); learning rate warms up
// linearly from lr/warmup_steps to lr over `warmup_steps`, then decays linearly to
// lr * final_lr_fraction at step `decay_steps` (0: the run's max_steps; no decay when
// neither is set) and stays there. clip_norm > 0: the gradients' global L2 norm is
// clipped to it before each step (after the data-parallel average).
struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adamw
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;
  double final_lr_fraction = 0.0;
  double beta2 = 0.999;
  double clip_norm = 0.0;
};
// The learning rate of step `step` (0-based) with `decay_steps` resolved.
double learning_rate_at(const OptimizerConfig& o, int64_t step, int64_t decay_steps);

using PipelineFactory = std::function<std::unique_ptr<Pipeline>()>;

struct TrainConfig {
  // The training pipeline: a definition (a spec, README.md "A pipeline in one JSON
  // document", or one made in C++) with its base directory for relative paths, or a
  // factory (tests and benchmarks; takes precedence).
  std::optional<PipelineDef> train_spec;
  std::string train_spec_dir;
  PipelineFactory train_pipeline;
  // The evaluation pipeline, run to its end at each evaluation. Optional when no target
  // is set. It must yield batches of the same representation as the training pipeline.
  std::optional<PipelineDef> eval_spec;
  std::string eval_spec_dir;
  PipelineFactory eval_pipeline;
  // An optional held-out test set, evaluated once at the end on the model that first met
  // the target (or, if none did, the final model): the protocol targets a validation
  // split and reports test accuracy separately (docs/protocol.md).
  std::optional<PipelineDef> test_spec;
  std::string test_spec_dir;
  PipelineFactory test_pipeline;
  // Mix the run's seed into the training pipeline's seed (PipelineDef::with_mixed_seed),
  // so that --seed varies the data order and augmentation too; false keeps the spec's
  // own seed.
  bool seed_pipeline = true;

  InputOptions input;
  ModelConfig model;
  OptimizerConfig optimizer;

  // Stop when an evaluation reaches this accuracy (in [0,1]) or this mean loss.
  std::optional<double> target_accuracy;
  std::optional<double> target_loss;
  // Budgets; 0 = no limit. max_fresh counts fresh examples (distinct (id, epoch) pairs
  // consumed by a step, see TrainResult::fresh); max_seconds counts training time
  // (start-up included, evaluations excluded).
  int64_t max_fresh = 0;
  int64_t max_steps = 0;
  double max_seconds = 0;

  int threads = 1;  // LibTorch intra-op threads (Debian's LibTorch uses 1 unless told)
  // The CPU split (0: off): the train step runs on the first `cpu_split` CPUs the process
  // may use and the pipeline's threads on the rest (core/cpu_affinity.h), so that decoding
  // does not slow the step down, as on an accelerator. docs/train.md.
  int cpu_split = 0;
  uint64_t seed = 0;
  std::string out;           // output directory ("" = write nothing)
  int64_t eval_every = 100;  // steps between evaluations; 0 = only at the end
  // Or: evaluate each time this many more fresh examples have been read (0: off). Runs
  // with different echo factors then evaluate equally often per fresh example, which
  // keeps time-to-target comparable: while an evaluation runs, the pipeline's buffers
  // keep filling, so a run that evaluated more often would read fresh data for free.
  int64_t eval_every_fresh = 0;
  // "inline": evaluate at each evaluation point and stop as soon as the target is met
  // (cheap; the evaluation pauses the training clock, but the pipeline keeps reading
  // meanwhile). "snapshots": at each evaluation point only copy the model's weights
  // (on the clock), train on to the budget, then evaluate every snapshot after training,
  // off the clock; time to target is the training-side time at which the first snapshot
  // that meets the target was taken. The protocol's wall-clock runs use it
  // (docs/protocol.md): evaluations then neither cost time nor let the pipeline read
  // ahead for free. Snapshots go to `out`/snapshots/ (removed once evaluated unless
  // keep_snapshots) or, without `out`, stay in memory.
  std::string eval_mode = "inline";
  bool keep_snapshots = false;
  bool eval_at_end = true;       // evaluate after the last step if it was not just evaluated
  int64_t checkpoint_every = 0;  // steps between checkpoints in `out`; 0 = only at the end
  bool resume = false;           // continue from the checkpoint in `out`
  // Data-parallel training (docs/distributed.md): this process's rank in a job joined
  // with Collective::connect; null for one process. Each rank reads its own share of the
  // training data (the trainer puts a `shard` stage first in train_spec; a
  // train_pipeline factory must shard by itself), echoes its own stream, and the
  // gradients are averaged over ranks every step. Counts, budgets and evaluations are
  // global; rank 0 evaluates and writes the outputs and the checkpoint.
  std::shared_ptr<Collective> collective;
  // How the ranks share the training data (docs/distributed.md): "files", each rank its
  // own `shard` of the spec's data with a seed of its own and the spec's batch per rank;
  // or "elastic", an `elastic` stage of `lanes` lanes first (PipelineDef::
  // with_elastic_first), the same seed on every rank, the spec's batch the global batch
  // and each rank's gradient weighted by its rows: N ranks train the steps one rank
  // trains, and a checkpoint resumes on any number of ranks that divides `lanes`.
  std::string sharding = "files";
  int64_t lanes = 12;

  // "auto": a \r-updated line when stderr is a terminal, plain lines every
  // progress_seconds otherwise; "tty", "lines" or "off" force one.
  std::string progress = "auto";
  double progress_seconds = 10;
};

// Reads a config object; every field is optional (see docs/train.md). Spec file names
// (train_spec / eval_spec) are relative to `base_dir`; "out" to the current directory.
// Errors name the JSON path: "train config: $.model.kind: ...".
TrainConfig train_config_from_json(const nlohmann::json& json, const std::string& base_dir = "");
TrainConfig load_train_config(const std::string& path);
// Loads a pipeline spec from a file into `spec` (parsed: PipelineDef::from_json) and
// its folder into `dir`.
void load_spec_into(const std::string& path, std::optional<PipelineDef>& spec, std::string& dir);
// The config as JSON (specs inline), as saved in out/config.json.
nlohmann::json train_config_to_json(const TrainConfig& config);
// Refuses a config that cannot run: unknown model, a target outside [0,1], no training
// pipeline, a target without an evaluation pipeline, negative budgets... Throws
// dataecho::Error (kInvalidArgument) with a message naming the option.
void validate_train_config(const TrainConfig& config);

}  // namespace dataecho::train
