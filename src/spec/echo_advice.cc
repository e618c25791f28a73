// The echo recommendation of `dataecho profile` and de.profile (see the header).
#include "dataecho/spec/echo_advice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

// The pipeline is the bottleneck, and echo pays, when R exceeds this (measurement noise
// keeps R near 1 for a pipeline that just keeps up).
constexpr double kEchoAboveR = 1.1;

std::string num(double v, int digits = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// The recommendations other than echo's placement (which advise_echo adds last).
void add_recommendations(EchoAdvice& a, const PipelineDef* def, double upstream_ms,
                         double downstream_ms) {
  const std::string train_step = num(downstream_ms, 2) + " ms";
  const bool has_stages = def != nullptr;
  auto prefetch = [&] {
    const bool ends_in_prefetch =
        has_stages && !def->stages().empty() && def->stages().back().op == "prefetch";
    // (A named string: GCC 12 warns falsely (-Warray-bounds) on push_back of the literal.)
    static const std::string kAddPrefetch =
        "add {\"op\":\"prefetch\",\"buffer\":2} at the end: the pipeline then works while "
        "the train step runs, instead of after it";
    if (has_stages && !ends_in_prefetch) a.recommendations.push_back(kAddPrefetch);
  };
  if (a.r <= kEchoAboveR) {
    a.recommendations.push_back("the pipeline keeps up: it produces a batch in " +
                                num(upstream_ms, 2) + " ms and the train step takes " + train_step +
                                " (R = " + num(a.r, 2) +
                                "): training is the bottleneck, and echo would not help");
    prefetch();
    return;
  }
  const auto& st = a.stages[static_cast<size_t>(a.slowest_stage_index)];
  const double per_batch = st["per_batch_ms"].get<double>();
  const int64_t par = st["parallelism"].get<int64_t>();
  // The op, from the node's label ("3:map(decode_image)", "1:interleave").
  const std::string& name = a.slowest_stage;
  const size_t colon = name.find(':');
  const std::string op = colon == std::string::npos
                             ? std::string()
                             : name.substr(colon + 1, name.find('(', colon) - colon - 1);
  const std::string share = num(100 * st["wall_share"].get<double>(), 0) + "%";
  if (op == "map" || op == "interleave") {
    // Enough threads for the stage to keep up with the train step.
    const int64_t want =
        static_cast<int64_t>(std::ceil(static_cast<double>(par) * per_batch / downstream_ms));
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    a.recommendations.push_back(
        "raise \"parallelism\" of " + a.slowest_stage + " from " + std::to_string(par) + " to " +
        std::to_string(want) + ": it is busy " + num(per_batch, 2) + " ms per batch over " +
        std::to_string(par) + (par == 1 ? " thread" : " threads") + " (" + share +
        " of the pipeline's time) against a train step of " + train_step + ". Up to " +
        std::to_string(cores) + " (the cores) if it computes; more if it waits on I/O");
  } else {
    a.recommendations.push_back(
        "the bottleneck " + a.slowest_stage + " (" + num(per_batch, 2) + " ms per batch, " + share +
        " of the pipeline's time) has no parallelism of its own: " +
        (a.slowest_stage_index == 0 ? "read from more files at once (an interleave after the "
                                      "source with a larger \"cycle\"), "
                                    : "") +
        "or echo (below)");
  }
  prefetch();
}

// decode_augment's args that decode (the rest augment).
bool decodes(const std::string& arg) {
  return arg == "channels" || arg == "strict" || arg == "fast_huffman" || arg == "decoder_scale";
}

// The spec with stage `at`, a decode_augment map, split into decode_image, an echo of
// `factor` and augment with the same augmentation: echo before augmentation, where the
// fused stage left room only for echoing after it.
nlohmann::json split_decode_augment(const PipelineDef& def, size_t at, double factor) {
  nlohmann::json spec = def.to_json();
  const nlohmann::json fused = spec["stages"][at];
  nlohmann::json decode = fused, augment = fused;
  decode["fn"] = "decode_image";
  augment["fn"] = "augment";
  nlohmann::json dargs = nlohmann::json::object(), aargs = nlohmann::json::object();
  const nlohmann::json args = fused.value("args", nlohmann::json::object());
  for (const auto& [k, v] : args.items()) {
    if (k == "decoder_scale") continue;  // a decode_augment crop's shortcut
    if (k == "field") {
      dargs[k] = v;
      aargs[k] = v;
    } else {
      (decodes(k) ? dargs : aargs)[k] = v;
    }
  }
  if (aargs.contains("output") && dargs.contains("field")) aargs["field"] = dargs["field"];
  decode["args"] = dargs;
  augment["args"] = aargs;
  PipelineDef echo;
  echo.echo({.factor = factor});
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < spec["stages"].size(); ++i) {
    if (i != at) {
      stages.push_back(spec["stages"][i]);
      continue;
    }
    stages.push_back(decode);
    stages.push_back(echo.stages()[0].to_json());
    stages.push_back(augment);
  }
  spec["stages"] = stages;
  return spec;
}

// The echo's factor and placement, and the recommendation that says them (a.r is above
// kEchoAboveR).
void add_echo(EchoAdvice& a, const PipelineDef* def, double upstream_ms, double downstream_ms) {
  const bool has_stages = def != nullptr;
  a.recommended_factor = std::min(kLargestFactorShown, std::round(a.r * 10) / 10);
  a.factor_capped = a.r > kLargestFactorShown;
  // Is the slowest stage at or after the batch stage?
  bool after_batch = false;
  bool augment_after = false;
  bool split = false;
  if (has_stages) {
    const auto& stages = def->stages();
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
    a.recommended_spec = def->inserting(std::min(slowest, stages.size()), echo.stages()).to_json();
    // The slowest stage decodes and augments in one: echo goes between the two halves.
    split = !after_batch && slowest >= 1 && slowest <= stages.size() &&
            stages[slowest - 1].op == "map" && stages[slowest - 1].fn() == "decode_augment";
    if (split) a.recommended_spec = split_decode_augment(*def, slowest - 1, a.recommended_factor);
  }
  std::string where = "right after " + a.slowest_stage;
  if (split) {
    a.placement = "split " + a.slowest_stage +
                  " (decode_augment) into decode_image and augment with the same augmentation "
                  "and echo between them (example echoing before augmentation: each copy gets "
                  "its own augmentation; after decode_augment every copy would be the same; a "
                  "shuffle after the echo keeps copies out of the same batch)";
  } else if (after_batch) {
    a.placement = where + " (batch echoing)";
  } else if (augment_after) {
    a.placement = where +
                  " (example echoing before augmentation: each copy gets its own augmentation; "
                  "a shuffle after the echo keeps copies out of the same batch)";
  } else {
    a.placement =
        where + " (example echoing; a shuffle after the echo keeps copies out of the same batch)";
  }
  const double max_factor = std::min(kLargestFactorShown, std::ceil(a.r));
  a.placement +=
      "; or {\"op\":\"echo\",\"factor\":\"adaptive\",\"max_factor\":" + num(max_factor, 0) + "} " +
      (split ? "between them" : "there");
  const std::string ratio =
      "R = " + num(upstream_ms, 2) + " / " + num(downstream_ms, 2) + " ms per batch";
  if (a.factor_capped) {
    // Lead with the pipeline's own fixes (added above): echo cannot close this gap.
    a.recommendations.push_back(
        "echo alone cannot close this gap (" + ratio + " = " + num(a.r) +
        "): the committed experiments show echo paying up to a factor of " +
        num(kLargestFactorShown, 0) + " (" + kLargestFactorEvidence +
        "), not beyond; fix the pipeline first, then echo with a factor of at most " +
        num(a.recommended_factor, 0) + " " + a.placement);
    return;
  }
  a.recommendations.push_back("echo with a factor of " + num(a.recommended_factor) + " (about " +
                              ratio + ") " + a.placement);
}

}  // namespace

EchoAdvice advise_echo(nlohmann::json stats, const nlohmann::json& spec, int64_t batches,
                       double upstream_ms, double downstream_ms) {
  std::optional<PipelineDef> def;
  if (spec.is_object() && spec.contains("stages") && spec["stages"].is_array())
    def = PipelineDef::from_json(spec);
  return advise_echo(std::move(stats), def, batches, upstream_ms, downstream_ms);
}

EchoAdvice advise_echo(nlohmann::json stats, const std::optional<PipelineDef>& given,
                       int64_t batches, double upstream_ms, double downstream_ms) {
  EchoAdvice a;
  a.stages = std::move(stats);
  // Only a definition that lists stages places the echo by op.
  const PipelineDef* def = given && given->lists_stages() ? &*given : nullptr;
  const bool has_stages = def != nullptr;
  double worst = -1;
  for (size_t i = 0; i < a.stages.size(); ++i) {
    auto& st = a.stages[i];
    int64_t par = 1;
    if (has_stages && i > 0 && i - 1 < def->stages().size()) {
      if (const auto p = def->option<int64_t>(i - 1, "parallelism")) par = std::max<int64_t>(1, *p);
    }
    // "auto": the tuner's last choice, which the node publishes.
    if (st.contains("values") && st["values"].contains("parallelism"))
      par = std::max<int64_t>(1, static_cast<int64_t>(st["values"]["parallelism"].get<double>()));
    st["parallelism"] = par;
    double per_batch = st["busy_ms"].get<double>() / static_cast<double>(par) /
                       static_cast<double>(std::max<int64_t>(1, batches));
    st["per_batch_ms"] = per_batch;
    const int64_t elements = st.value("elements", int64_t{0});
    st["ms_per_element"] =
        elements > 0 ? st["busy_ms"].get<double>() / static_cast<double>(elements) : 0.0;
    st["wall_share"] = upstream_ms > 0 ? per_batch / upstream_ms : 0.0;
    if (per_batch > worst) {
      worst = per_batch;
      a.slowest_stage = st["name"].get<std::string>();
      a.slowest_stage_index = static_cast<int64_t>(i);
    }
  }
  a.r = downstream_ms > 0 ? upstream_ms / downstream_ms : 0;
  for (size_t i = 0; i < a.stages.size(); ++i)
    a.stages[i]["bottleneck"] =
        a.r > kEchoAboveR && static_cast<int64_t>(i) == a.slowest_stage_index;
  add_recommendations(a, def, upstream_ms, downstream_ms);

  if (a.r <= kEchoAboveR) {
    a.recommended_factor = 1;
    a.placement = "no echo needed: the pipeline keeps up with training (R <= 1.1)";
    return a;
  }
  add_echo(a, def, upstream_ms, downstream_ms);
  return a;
}

}  // namespace dataecho
