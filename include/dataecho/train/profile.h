// Bottleneck profile: the practitioner's first step in the paper. Runs the training
// pipeline alone (upstream time per batch, per-stage busy/wait times), then the model's
// train step on synthetic batches of the same shape (downstream time per batch), and
// recommends an echo factor (about R) and where to put the echo stage (right after the
// slowest stage). Thread-safety: plain function.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/train/train_config.h"

namespace dataecho::train {

struct ProfileOptions {
  std::optional<PipelineDef> train_spec;
  std::string train_spec_dir;
  PipelineFactory train_pipeline;  // takes precedence over the spec
  InputOptions input;
  ModelConfig model;
  OptimizerConfig optimizer;
  int threads = 1;
  uint64_t seed = 0;
  double pipeline_seconds = 5;   // how long to run the pipeline alone (or to its end)
  int64_t pipeline_batches = 0;  // or stop after this many batches (0: no limit)
  int64_t warmup_steps = 3;      // train steps not timed
  int64_t train_steps = 20;      // timed train steps, at most
  // The train-step phase's bound in seconds (warm-up included; < 0: pipeline_seconds):
  // timing stops once it is spent, after at least one timed step, and a single step
  // slower than the bound is reported in the notes.
  double step_seconds = -1;
  // What the profile is doing, a line at a time (phases, and steps slower than a second);
  // none when empty. `dataecho profile` prints them on standard error.
  std::function<void(const std::string&)> progress;
  // Drop echo stages from the spec while profiling: R is about the pipeline without echo.
  bool strip_echo = true;
};

struct ProfileReport {
  nlohmann::json stages;  // the pipeline's per-node stats, plus "per_batch_ms" and "parallelism"
  int64_t batches = 0;    // batches the pipeline produced
  double pipeline_seconds = 0;
  double upstream_ms_per_batch = 0;
  double downstream_ms_per_batch = 0;
  int64_t train_steps_timed = 0;    // the steps downstream_ms_per_batch averages
  double r = 0;                     // upstream / downstream
  std::string slowest_stage;        // node label, "2:map"
  int64_t slowest_stage_index = 0;  // node index (0 = source; spec stage i is node i+1)
  double recommended_factor = 1;    // 1: no echo needed; at most kLargestFactorShown
  bool factor_capped = false;       // R beyond that: the pipeline's fixes come first
  std::string placement;            // in words
  nlohmann::json recommended_spec;  // the spec with the echo stage inserted (when a spec was given)
  std::vector<std::string> recommendations;  // EchoAdvice::recommendations
  std::string input;                         // the input signature, described
  std::string notes;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

ProfileReport run_profile(const ProfileOptions& options);

}  // namespace dataecho::train
