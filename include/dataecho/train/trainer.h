// Trainer: trains a model on a pipeline's batches until an evaluation reaches the target
// or a budget runs out, counting fresh and echoed examples (the paper's protocol), the
// time blocked on the pipeline and the time computing, and saving a checkpoint that
// --resume continues from. Thread-safety: run() from one thread; request_stop() from any
// thread (or a signal handler, through stop_flag()).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/train/train_config.h"

namespace dataecho::train {

class ClassifierImpl;  // dataecho/train/model.h

struct EvalRecord {
  int64_t step = 0;
  int64_t fresh = 0;      // fresh examples trained on so far (see TrainResult::fresh)
  int64_t echoed = 0;     // other rows trained on so far
  int64_t raw_reads = 0;  // elements the source had read (read-ahead included)
  // Training-side time so far, from building the pipeline (start-up included),
  // evaluations excluded. In "snapshots" mode: when the evaluated snapshot was taken.
  double train_seconds = 0;
  double wall_seconds = 0;  // wall-clock time so far (evaluations included)
  double accuracy = 0;      // on the evaluation pipeline
  // Mean cross-entropy on the evaluation pipeline, in nats: per example, or for a language
  // model per target token (accuracy: of the next token).
  double loss = 0;
  int64_t examples = 0;  // evaluated examples (a language model's: blocks)
  // A language model's scored target tokens (padding excluded); 0 for a classifier. With
  // byte tokens (tokenize's "bytes") each is one byte of the text, and
  // bits_per_byte() = loss / ln 2.
  int64_t tokens = 0;
  double bits_per_byte() const;
  double train_loss = 0;  // mean training loss of the steps since the previous evaluation
  double lr = 0;          // learning rate of the last step
  nlohmann::json to_json() const;
  static EvalRecord from_json(const nlohmann::json& j);
};

struct TrainResult {
  // "target", "max_steps", "max_fresh", "max_seconds", "end_of_data" or "interrupted".
  std::string stop_reason;
  bool reached_target = false;
  int64_t steps = 0;
  // Fresh examples: distinct (source id, epoch) pairs of which at least one copy was
  // trained on (docs/protocol.md, section 3). Deterministic for a fixed echo factor:
  // read-ahead that no step consumed does not count, and a copy trained on before its
  // echo-0 original (a shuffle after the echo) counts once, when it comes.
  int64_t fresh = 0;
  int64_t echoed = 0;     // rows consumed minus fresh
  int64_t raw_reads = 0;  // elements the source read (read-ahead and epoch re-reads included)
  int64_t fresh_by_echo_index = 0;  // rows consumed with echo index 0 (the old count)
  // Rows that repeat another row (the same (id, epoch)) of the same global batch: echo
  // copies that no shuffle after the echo spread to other batches. In summary.json also
  // as batch_duplicate_rate, over all rows trained on. Data-parallel: the ranks' shares
  // are disjoint, so this is the sum of the ranks' own.
  int64_t batch_duplicates = 0;
  std::optional<int64_t> raw_reads_to_target;
  // To the first evaluation that met the target (unset when never met).
  std::optional<int64_t> steps_to_target, fresh_to_target;
  // Training-side time from building the pipeline (start-up and filling buffers
  // included, evaluations excluded): the protocol's time to target.
  std::optional<double> seconds_to_target;
  std::optional<double> wall_seconds_to_target;  // wall-clock (evaluations included)
  double wall_seconds = 0;
  double startup_seconds = 0;  // building the pipeline until its first batch
  // The process's peak resident memory during the run, in MiB (Linux: VmHWM, reset at
  // the run's start; where it cannot be reset, the peak since the process started).
  std::optional<double> peak_rss_mib;
  // The process's CPU time (user + system, every thread: the train step, the pipeline,
  // inline evaluations) from the start of this run to the end of training ("snapshots"
  // mode: before the snapshots are evaluated); a resumed run counts from the resume.
  double cpu_seconds = 0;
  // With TrainConfig::cpu_split: the CPUs of the train step and of the pipeline's threads.
  std::vector<int> train_cpus, pipeline_cpus;
  double snapshot_seconds = 0;  // "snapshots" mode: copying weights (on the clock)
  std::string eval_mode;
  double train_seconds = 0;    // start-up + wait + compute + bookkeeping
  double wait_seconds = 0;     // blocked in Pipeline::next()
  double compute_seconds = 0;  // batch to tensors, forward, backward, optimizer step
  double eval_seconds = 0;
  // R = time the pipeline needs per batch / time per train step. See docs/train.md:
  // measured as achieved_echo * (wait + compute) / compute, exact when the pipeline is
  // the bottleneck (pipeline_bound), an upper bound otherwise.
  double r_estimate = 0;
  bool pipeline_bound = false;
  double achieved_echo = 1;  // rows consumed / fresh rows
  std::optional<EvalRecord> final_eval;
  // The test set (TrainConfig::test_spec), on the model at the target, or the final one.
  std::optional<EvalRecord> test_eval;
  std::string test_model;  // "target" or "final"
  // Data-parallel (docs/distributed.md): the ranks, and the largest rank's seconds in the
  // gradient and buffer collectives (included in compute_seconds). The counts above are
  // global; wait, compute and peak memory are the largest rank's.
  int world_size = 1;
  double communication_seconds = 0;
  bool ranks_identical = true;  // every rank's parameters and buffers, bit for bit
  std::vector<EvalRecord> evals;
  std::vector<float> losses;      // training loss of every step
  std::string input;              // the input signature, described
  int64_t parameters = 0;         // trainable parameters of the model
  nlohmann::json pipeline_stats;  // the training pipeline's per-node stats
  // A service source's decision loop (its tuner's report()["scale"]); null: none.
  nlohmann::json pipeline_scale;
  nlohmann::json to_json() const;  // summary.json (without the per-step losses)
  // A summary as to_json() writes it, read back: what it holds, by the same table of
  // fields (src/train/train_result.cc); the figures derived from others are not read,
  // nor `evals` and `losses` (evals.jsonl), and fields it does not know are let be.
  // Errors name the JSON path ("train result: $.steps: expected an integer ...").
  static TrainResult from_json(const nlohmann::json& j);
};

class Trainer {
 public:
  explicit Trainer(TrainConfig config);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Validates the config, builds the pipelines and checks their batches against the
  // model (all before the first step), then trains. Throws dataecho::Error.
  TrainResult run();

  // Ends run() after the current step, with a checkpoint (stop_reason "interrupted").
  void request_stop() { stop_.store(true); }
  std::atomic<bool>& stop_flag() { return stop_; }

  // The model after run() (null before).
  std::shared_ptr<ClassifierImpl> model() const;

 private:
  struct State;
  TrainConfig config_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<State> state_;
};

}  // namespace dataecho::train
