// Echo advice: from a pipeline measured alone (its per-node stats and its time per batch)
// and the training step's time per batch, the ratio R of the two, the slowest stage,
// and where to put an echo stage with which factor (the paper's rule: right after the
// slowest stage, factor about R). Shared by `dataecho profile` (LibTorch train step) and
// the Python package's de.profile (the user's own step), so both give the same advice.
// Thread-safety: plain function.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace dataecho {

struct EchoAdvice {
  nlohmann::json stages;            // the per-node stats, plus "per_batch_ms" and "parallelism"
  double r = 0;                     // upstream / downstream time per batch
  std::string slowest_stage;        // node label, "2:map"
  int64_t slowest_stage_index = 0;  // node index (0 = source; spec stage i is node i+1)
  double recommended_factor = 1;    // 1: no echo needed
  std::string placement;            // in words
  nlohmann::json recommended_spec;  // the spec with the echo stage inserted (when given)
};

// `stats`: PipelineStats::to_json() of the pipeline run alone for `batches` batches;
// `spec`: its JSON spec (null when it has none: then no placement by op and no
// recommended spec). Times are milliseconds per batch.
EchoAdvice advise_echo(nlohmann::json stats, const nlohmann::json& spec, int64_t batches,
                       double upstream_ms_per_batch, double downstream_ms_per_batch);

}  // namespace dataecho
