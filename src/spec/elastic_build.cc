// The `elastic` stage's build: refusals, the in-lane rewrites, the plan and the merge
// (src/spec/elastic_build.h).
#include "elastic_build.h"

#include <set>

namespace dataecho::elastic_build {
namespace {

std::string path_of(size_t i) { return "$.stages[" + std::to_string(i) + "]"; }

[[noreturn]] void refuse(size_t i, const nlohmann::json& stages, const std::string& why) {
  throw_spec_error(path_of(i) + " (" + stages[i].value("op", "") + ")", why);
}

bool adaptive_echo(const nlohmann::json& stage) {
  return stage.value("op", "") == "echo" && stage.contains("factor") &&
         stage.at("factor").is_string();
}

// A stage of the lanes (before the batch) that an elastic pipeline refuses, and why;
// "" where it is allowed.
std::string refused_in_lane(const nlohmann::json& stage) {
  const std::string op = stage.value("op", "");
  if (op == "cache" || op == "take" || op == "skip")
    return "counts or keeps elements per lane in an elastic pipeline (each lane would take, "
           "skip or cache its own share): put it after the data is split by ranks another way, "
           "or leave it out";
  if (op == "shard")
    return "the elastic stage shares the data between ranks already: leave the shard out";
  if (op == "bucket" || op == "padded_batch")
    return "the elastic merge collates with `batch`: " + op +
           " is not supported in an elastic pipeline";
  if (op == "unbatch") return "a batch before the elastic merge's batch cannot be split by lanes";
  if (op == "map" && stage.contains("deterministic") && stage.at("deterministic") == false)
    return "an unordered map makes a lane's order depend on timing, so the ranks' batches would "
           "differ from run to run: leave \"deterministic\" true";
  if (adaptive_echo(stage))
    return "an adaptive or \"auto\" echo repeats by timing, which no other rank can follow: "
           "give a numeric factor";
  return "";
}

// Refusals of the spec around the stages; returns the batch stage's index.
size_t check(const nlohmann::json& canonical, const nlohmann::json& stages) {
  if (!canonical.contains("seed"))
    refuse(0, stages,
           "needs the pipeline's \"seed\": every rank draws the same order and augmentation "
           "from it, so give the spec a seed (the same on every rank)");
  if (canonical.value("deterministic", true) == false)
    refuse(0, stages,
           "needs a deterministic pipeline (\"deterministic\": false lets the order depend on "
           "timing, which no other rank can follow)");
  if (canonical.contains("source") && canonical["source"].value("kind", "") == "sample")
    refuse(0, stages,
           "a sample source draws its mix per element, which lanes cannot split: read one "
           "source");
  size_t batch = 0;
  for (size_t i = 1; i < stages.size(); ++i) {
    const std::string op = stages[i].value("op", "");
    if (op == "elastic") refuse(i, stages, "must be the first stage, and only once");
    if (batch == 0) {
      if (std::string why = refused_in_lane(stages[i]); !why.empty()) refuse(i, stages, why);
      if (op == "batch") batch = i;
    } else if (op != "echo" && op != "prefetch") {
      refuse(i, stages,
             "after the batch an elastic pipeline takes only echo and prefetch (the merge "
             "absorbs them): a buffer after the merge would belong to one rank");
    } else if (adaptive_echo(stages[i])) {
      refuse(i, stages, refused_in_lane(stages[i]));
    }
  }
  if (batch == 0)
    refuse(0, stages, "needs a `batch` stage: the elastic merge collates the global batch");
  return batch;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The in-lane rewrites of stages [1, batch); `consumers`: N W.
void rewrite(nlohmann::json& stages, size_t batch, int64_t lanes, int64_t consumers) {
  const int64_t per_rank = lanes / consumers;
  for (size_t i = 1; i < batch; ++i) {
    nlohmann::json& s = stages[i];
    const std::string op = s.value("op", "");
    if (op == "shuffle" && s.contains("buffer") && s["buffer"].is_number_integer())
      s["buffer"] = ceil_div(s["buffer"].get<int64_t>(), lanes);
    if (op == "map" && s.contains("parallelism") && s["parallelism"].is_number_integer())
      s["parallelism"] = std::max<int64_t>(1, ceil_div(s["parallelism"].get<int64_t>(), per_rank));
    if (op == "interleave") s["parallelism"] = 0;  // on the lane's own thread
  }
}

}  // namespace

bool first_is_elastic(const nlohmann::json& stages) {
  return stages.is_array() && !stages.empty() && stages[0].is_object() &&
         stages[0].value("op", "") == "elastic";
}

Lanes plan_lanes(const nlohmann::json& canonical, const DatasetPtr& source,
                 const Registry& registry, BuildContext& ctx) {
  Lanes l;
  l.stages = canonical.at("stages");
  l.batch = check(canonical, l.stages);
  SpecObject st(l.stages[0], path_of(0));
  st.declare(registry.stage_schemas.at("elastic"));
  st.get_string("op");
  const int64_t lanes = st.get_int("lanes");
  const int64_t pieces = st.get_int("pieces_per_lane");
  l.merge.world_size = st.get_int("world_size");
  l.merge.rank = st.get_int("rank");
  l.merge.consumers_per_rank = st.get_int("consumers_per_rank");
  l.merge.consumer = st.get_int("consumer");
  l.merge.lane_counts = st.get_bool("lane_counts");
  ctx.node_index = 1;
  const uint64_t seed =
      st.has("seed") ? static_cast<uint64_t>(st.get_int("seed")) : ctx.node_seed();
  st.finish();
  try {
    elastic_lanes_of(lanes, l.merge.world_size, l.merge.rank, l.merge.consumers_per_rank,
                     l.merge.consumer);
    l.plan = std::make_shared<const ElasticPlan>(ElasticPlan::of(*source, lanes, pieces, seed));
  } catch (const Error& e) {
    refuse(0, l.stages, e.message());
  }
  rewrite(l.stages, l.batch, lanes, l.merge.world_size * l.merge.consumers_per_rank);
  return l;
}

DatasetPtr merge_over(const Lanes& lanes, DatasetPtr lane, BuildContext& ctx) {
  ElasticBatchOptions o = lanes.merge;
  for (size_t i = lanes.batch; i < lanes.stages.size(); ++i) {
    SpecObject st(lanes.stages[i], path_of(i));
    st.declare(registry().stage_schemas.at(st.get_string("op")));
    const std::string op = st.get_string("op");
    ctx.node_index = static_cast<int64_t>(i) + 1;
    if (op == "batch") {
      o.global_batch = st.get_int("size");
      o.drop_remainder = st.get_bool("drop_remainder");
    } else if (op == "echo") {
      if (o.batch_echo != 1) refuse(i, lanes.stages, "one echo after the batch, not two");
      const nlohmann::json* factor = st.raw("factor");
      o.batch_echo = factor && factor->is_number() ? factor->get<double>() : 0;
      o.echo_seed = st.has("seed") ? static_cast<uint64_t>(st.get_int("seed")) : ctx.node_seed();
    } else {
      // "auto": the tuner does not size the merge's batches ahead; 2, prefetch's start.
      const nlohmann::json* buffer = st.raw("buffer");
      o.prefetch = buffer && buffer->is_number_integer() ? buffer->get<int64_t>() : 2;
    }
    st.finish();
  }
  try {
    return make_elastic_batch(std::move(lane), lanes.plan, o);
  } catch (const Error& e) {
    refuse(0, lanes.stages, e.message());
  }
}

}  // namespace dataecho::elastic_build
