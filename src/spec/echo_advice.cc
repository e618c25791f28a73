// The echo recommendation of `dataecho profile` and de.profile (see the header).
#include "dataecho/spec/echo_advice.h"

#include <algorithm>
#include <cmath>

#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"

namespace dataecho {

EchoAdvice advise_echo(nlohmann::json stats, const nlohmann::json& spec, int64_t batches,
                       double upstream_ms, double downstream_ms) {
  EchoAdvice a;
  a.stages = std::move(stats);
  const bool has_stages = spec.is_object() && spec.contains("stages") && spec["stages"].is_array();
  double worst = -1;
  for (size_t i = 0; i < a.stages.size(); ++i) {
    auto& st = a.stages[i];
    int64_t par = 1;
    if (has_stages && i > 0 && i - 1 < spec["stages"].size()) {
      const auto& sj = spec["stages"][i - 1];
      if (sj.contains("parallelism") && sj["parallelism"].is_number_integer())
        par = std::max<int64_t>(1, sj["parallelism"].get<int64_t>());
    }
    st["parallelism"] = par;
    double per_batch = st["busy_ms"].get<double>() / static_cast<double>(par) /
                       static_cast<double>(std::max<int64_t>(1, batches));
    st["per_batch_ms"] = per_batch;
    if (per_batch > worst) {
      worst = per_batch;
      a.slowest_stage = st["name"].get<std::string>();
      a.slowest_stage_index = static_cast<int64_t>(i);
    }
  }
  a.r = downstream_ms > 0 ? upstream_ms / downstream_ms : 0;

  if (a.r <= 1.1) {
    a.recommended_factor = 1;
    a.placement = "no echo needed: the pipeline keeps up with training (R <= 1.1)";
    return a;
  }
  a.recommended_factor = std::round(a.r * 10) / 10;
  // Is the slowest stage at or after the batch stage?
  bool after_batch = false;
  bool augment_after = false;
  if (has_stages) {
    PipelineDef def = PipelineDef::from_json(spec);
    const auto& stages = def.stages();
    const size_t slowest = static_cast<size_t>(a.slowest_stage_index);
    for (size_t i = 0; i < slowest && i < stages.size(); ++i)
      if (stages[i].op == "batch") after_batch = true;
    // An augmentation after the slowest stage, by what its function declares
    // (decode_augment too).
    for (size_t i = slowest; i < stages.size(); ++i)
      if (stages[i].op == "map" && registry().traits_of(stages[i].fn()).augmentation)
        augment_after = true;
    PipelineDef echo;
    echo.echo({.factor = a.recommended_factor});
    def.insert(slowest, echo.stages());
    a.recommended_spec = def.to_json();
  }
  std::string where = "right after " + a.slowest_stage;
  if (after_batch) {
    a.placement = where + " (batch echoing)";
  } else if (augment_after) {
    a.placement = where +
                  " (example echoing before augmentation: each copy gets its own augmentation; "
                  "a shuffle after the echo keeps copies out of the same batch)";
  } else {
    a.placement =
        where + " (example echoing; a shuffle after the echo keeps copies out of the same batch)";
  }
  a.placement += "; or {\"op\":\"echo\",\"factor\":\"adaptive\",\"max_factor\":" +
                 std::to_string(static_cast<int64_t>(std::ceil(a.r))) + "} there";
  return a;
}

}  // namespace dataecho
