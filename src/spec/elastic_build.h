// The `elastic` stage's build (ops/elastic.h): the stages before the batch become one
// lane's stages over a LaneSource, the batch and the echo and prefetch after it the
// merge. Internal to src/spec: PipelineDef::build_nodes calls it when the first stage
// is `elastic`.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "dataecho/ops/elastic.h"
#include "dataecho/spec/registry.h"

namespace dataecho::elastic_build {

// The options of the elastic stage that depend on where the pipeline runs, not on what
// it produces: out of the state fingerprint.
inline constexpr const char* kRuntimeOptions[] = {"world_size", "rank", "consumers_per_rank",
                                                  "consumer", "lane_counts"};

// Whether the definition's first stage is `elastic`.
bool first_is_elastic(const nlohmann::json& stages);

struct Lanes {
  std::shared_ptr<const ElasticPlan> plan;
  ElasticBatchOptions merge;  // world size, rank, consumers (the rest: merge_over)
  size_t batch = 0;           // the batch stage's index
  nlohmann::json stages;      // the stages as the lanes build them (rewritten)
};

// Checks the refusals of an elastic pipeline (each names a stage's JSON path and says
// why), reads the elastic stage (stages[0], whose node seed `ctx` gives) and plans the
// source's pieces; its stages are the canonical ones with the in-lane rewrites (shuffle
// buffer ceil(B / K), map parallelism max(1, ceil(p / (K / N))), interleave on the lane's
// thread).
Lanes plan_lanes(const nlohmann::json& canonical, const DatasetPtr& source,
                 const Registry& registry, BuildContext& ctx);

// The merge over the lane's last node: the batch (stages[batch]) and the echo and
// prefetch after it, absorbed.
DatasetPtr merge_over(const Lanes& lanes, DatasetPtr lane, BuildContext& ctx);

}  // namespace dataecho::elastic_build
