// Spec builders for the engine's own source and operators.
#include "dataecho/core/rng.h"
#include "dataecho/ops/basic.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/interleave.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/sample.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

template <class Builder>
auto function_builder(SpecObject& st, const std::map<std::string, Builder>& known,
                      const char* what) {
  std::string name = st.get_string("fn");
  auto it = known.find(name);
  if (it == known.end()) {
    throw_spec_error(st.field_path("fn"), unknown_name(what, name, known));
  }
  SpecObject args = st.get_object("args");
  auto fn = it->second(args);
  args.finish();
  return std::make_pair(name, fn);
}

// True when `key` is "auto" (a setting the pipeline's tuner moves, core/tuner.h); false
// when absent or a number, which the caller then reads as before.
bool is_auto(SpecObject& s, const std::string& key) {
  if (!s.has(key)) return false;
  const nlohmann::json* v = s.raw(key);
  if (!v->is_string()) return false;
  if (*v != "auto")
    throw_spec_error(s.field_path(key),
                     "expected an integer or \"auto\", got \"" + v->get<std::string>() + "\"");
  return true;
}

// One input of a sample: a pipeline spec, or a source object alone ({"kind": ...}). Its
// errors name it by its path ($.source.inputs[1].stages[0].size). Without a seed of its
// own it gets one derived from the sample's, so that two inputs do not shuffle alike.
DatasetPtr build_sample_input(const nlohmann::json& j, const std::string& path, size_t i,
                              BuildContext& ctx) {
  if (!j.is_object())
    throw_spec_error(path,
                     "expected a pipeline {\"source\": ..., \"stages\": [...]} or a "
                     "source {\"kind\": ...}");
  const nlohmann::json spec = j.contains("kind") ? nlohmann::json{{"source", j}} : j;
  try {
    PipelineDef d = PipelineDef::from_json(spec);
    if (!spec.contains("seed")) d.seed(mix_seed(ctx.node_seed(), i) >> 1);
    if (!spec.contains("deterministic")) d.deterministic(ctx.deterministic);
    BuildOptions o;
    o.base_dir = ctx.base_dir;
    std::vector<DatasetPtr> nodes;
    return d.build_nodes(o, "sample[" + std::to_string(i) + "]/", nodes);
  } catch (const Error& e) {
    const std::string& m = e.message();
    if (e.stage() == "spec" && m.rfind("$", 0) == 0) {
      const bool source_only = j.contains("kind") && m.rfind("$.source", 0) == 0;
      throw Error(ErrorCode::kInvalidArgument, "spec", path + m.substr(source_only ? 8 : 1));
    }
    throw_spec_error(path, e.what());
  }
}

// {"kind": "sample", "inputs": [...], "weights": [...], "stop": "all", "seed": N}
DatasetPtr build_sample(SpecObject& s, BuildContext& ctx) {
  const std::string path = s.field_path("inputs");
  const nlohmann::json* inputs = s.raw("inputs");
  if (!inputs || !inputs->is_array() || inputs->empty())
    throw_spec_error(path, "expected a non-empty list of pipelines or sources");
  SampleOptions o;
  if (const nlohmann::json* w = s.raw("weights")) {
    if (!w->is_array() || w->size() != inputs->size())
      throw_spec_error(
          s.field_path("weights"),
          "expected a list of " + std::to_string(inputs->size()) + " numbers, one per input");
    for (const auto& x : *w) {
      if (!x.is_number() || x.get<double>() < 0)
        throw_spec_error(s.field_path("weights"), "expected numbers >= 0, got " + x.dump());
      o.weights.push_back(x.get<double>());
    }
  }
  const std::string stop = s.get_string("stop", "all", {"first", "all", "never"});
  o.stop = stop == "first"   ? SampleOptions::Stop::kFirst
           : stop == "never" ? SampleOptions::Stop::kNever
                             : SampleOptions::Stop::kAll;
  o.seed = s.has("seed") ? static_cast<uint64_t>(s.get_int("seed", 0, 0)) : ctx.node_seed();
  o.input_field = s.get_string("input_field", "");
  std::vector<DatasetPtr> ds;
  for (size_t i = 0; i < inputs->size(); ++i)
    ds.push_back(build_sample_input((*inputs)[i], path + "[" + std::to_string(i) + "]", i, ctx));
  try {
    return make_sample(std::move(ds), std::move(o));
  } catch (const Error& e) {
    throw_spec_error(s.path(), e.message());
  }
}

}  // namespace

void register_core_builders(Registry& r) {
  r.sources["sample"] = build_sample;
  r.sources["range"] = [](SpecObject& s, BuildContext&) {
    RangeOptions o;
    o.count = s.get_int("count", std::nullopt, 0);
    o.shards = s.get_int("shards", 1, 1);
    return make_range(o);
  };

  r.stages["map"] = [](SpecObject& s, DatasetPtr in, BuildContext& ctx) {
    MapOptions o;
    auto [name, fn] = function_builder(s, registry().map_fns, "map function");
    o.name = name;
    o.fn = fn;
    o.autotune = is_auto(s, "parallelism");
    if (!o.autotune) o.parallelism = static_cast<int>(s.get_int("parallelism", 1, 1, 256));
    o.deterministic = s.get_bool("deterministic", ctx.deterministic);
    o.buffer = s.get_int("buffer", 0, 0);
    o.seed = ctx.node_seed();
    return make_map(std::move(in), std::move(o));
  };
  r.stages["filter"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    auto [name, fn] = function_builder(s, registry().predicates, "predicate");
    return make_filter(std::move(in), name, fn);
  };
  r.stages["interleave"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    InterleaveOptions o;
    o.cycle = s.get_int("cycle", 4, 1, 1024);
    o.autotune = is_auto(s, "parallelism");
    if (!o.autotune) o.parallelism = s.get_int("parallelism", -1, -1, 1024);
    o.buffer_per_shard = s.get_int("buffer_per_shard", 2, 1);
    if (in->shards().empty()) {
      throw_spec_error(s.path(),
                       "interleave needs an input with shards: put it right after a source over "
                       "several files (or a range with \"shards\")");
    }
    return make_interleave(std::move(in), o);
  };
  r.stages["shuffle"] = [](SpecObject& s, DatasetPtr in, BuildContext& ctx) {
    ShuffleOptions o;
    o.buffer = s.get_int("buffer", std::nullopt, 1);
    o.seed = s.has("seed") ? static_cast<uint64_t>(s.get_int("seed", 0, 0)) : ctx.node_seed();
    o.reshuffle_each_iteration = s.get_bool("reshuffle_each_iteration", true);
    return make_shuffle(std::move(in), o);
  };
  r.stages["batch"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    BatchOptions o;
    o.size = s.get_int("size", std::nullopt, 1);
    o.drop_remainder = s.get_bool("drop_remainder", false);
    return make_batch(std::move(in), o);
  };
  r.stages["prefetch"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    PrefetchOptions o;
    o.autotune = is_auto(s, "buffer");
    if (!o.autotune) o.buffer = s.get_int("buffer", 2, 1);
    return make_prefetch(std::move(in), o);
  };
  r.stages["repeat"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    return make_repeat(std::move(in), s.get_int("count", -1, -1));
  };
  r.stages["take"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    return make_take(std::move(in), s.get_int("count", std::nullopt, 0));
  };
  r.stages["skip"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    return make_skip(std::move(in), s.get_int("count", std::nullopt, 0));
  };
  r.stages["shard"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    int64_t n = s.get_int("num_shards", std::nullopt, 1);
    int64_t index = s.get_int("index", std::nullopt, 0, n - 1);
    return make_shard(std::move(in), n, index);
  };
}

}  // namespace dataecho
