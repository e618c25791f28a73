// Echo advice: from a pipeline measured alone (its per-node stats and its time per batch)
// and the training step's time per batch, the ratio R of the two, the slowest stage,
// and where to put an echo stage with which factor (the paper's rule: right after the
// slowest stage, factor about R). Shared by `dataecho profile` (LibTorch train step) and
// the Python package's de.profile (the user's own step), so both give the same advice.
// Thread-safety: plain function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/spec/pipeline_def.h"

namespace dataecho {

// The largest echo factor the committed experiments show to pay, and where: advice never
// recommends more (an R of 240 does not make a factor of 240 pay).
inline constexpr double kLargestFactorShown = 6;
inline constexpr const char* kLargestFactorEvidence =
    "docs/results.md, the sweep: e = 6 before augmentation needed 5.83x [5.00-6.62] fewer "
    "fresh examples on Fashion-MNIST";

struct EchoAdvice {
  // The per-node stats, plus, per stage: "parallelism", "per_batch_ms" (busy time per
  // batch over its threads), "ms_per_element" (busy time per element it produced, on one
  // thread), "wall_share" (its busy time over its threads as a share of the pipeline's
  // wall-clock time) and "bottleneck" (the slowest stage, when the pipeline is slower
  // than training: R > 1.1).
  nlohmann::json stages;
  double r = 0;                     // upstream / downstream time per batch
  std::string slowest_stage;        // node label, "2:map"
  int64_t slowest_stage_index = 0;  // node index (0 = source; spec stage i is node i+1)
  double recommended_factor = 1;    // 1: no echo needed; at most kLargestFactorShown
  bool factor_capped = false;       // R is above kLargestFactorShown: echo alone cannot
                                    // close the gap, and the advice says so first
  std::string placement;            // in words
  nlohmann::json recommended_spec;  // the spec with the echo stage inserted (when given)
  // What to change, most effective first, each with the measured numbers behind it (as
  // Plumber does for tf.data): more parallelism at the bottleneck, a prefetch at the end,
  // echo with a factor about R.
  std::vector<std::string> recommendations;
};

// `stats`: PipelineStats::to_json() of the pipeline run alone for `batches` batches;
// `spec`: its JSON spec (null when it has none: then no placement by op and no
// recommended spec). Times are milliseconds per batch.
EchoAdvice advise_echo(nlohmann::json stats, const nlohmann::json& spec, int64_t batches,
                       double upstream_ms_per_batch, double downstream_ms_per_batch);
// The same from the pipeline's definition (nullopt, or a definition that lists no
// stages, when it has none); the JSON form above parses a spec with a "stages" list
// into this.
EchoAdvice advise_echo(nlohmann::json stats, const std::optional<PipelineDef>& def, int64_t batches,
                       double upstream_ms_per_batch, double downstream_ms_per_batch);

}  // namespace dataecho
