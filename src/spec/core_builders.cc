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
#include "spec/nested_pipeline.h"

namespace dataecho {
namespace {

// The "fn" and "args" of a map or filter stage, which function_builder reads: `what` is
// "function" or "predicate", `listed` where docs/spec.md lists them.
std::vector<OptionDecl> function_options(const std::string& what, const std::string& listed) {
  return {{.name = "fn",
           .type = OptionType::kString,
           .required = true,
           .doc = "the " + what + " (" + listed + ", below)"},
          {.name = "args",
           .type = OptionType::kJson,
           .fallback = nlohmann::json::object(),
           .shape = "an object of the " + what + "'s options",
           .written = Written::kUnlessDefault,
           .doc = "the " + what + "'s options"}};
}

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

}  // namespace

void use_nested_pipeline(
    const nlohmann::json& j, const std::string& path,
    const std::function<void(PipelineDef& d, const nlohmann::json& spec)>& use) {
  if (!j.is_object())
    throw_spec_error(path,
                     "expected a pipeline {\"source\": ..., \"stages\": [...]} or a "
                     "source {\"kind\": ...}");
  const nlohmann::json spec = j.contains("kind") ? nlohmann::json{{"source", j}} : j;
  try {
    PipelineDef d = PipelineDef::from_json(spec);
    use(d, spec);
  } catch (const Error& e) {
    const std::string& m = e.message();
    if (e.stage() == "spec" && m.rfind("$", 0) == 0) {
      const bool source_only = j.contains("kind") && m.rfind("$.source", 0) == 0;
      throw Error(ErrorCode::kInvalidArgument, "spec", path + m.substr(source_only ? 8 : 1));
    }
    throw_spec_error(path, e.what());
  }
}

namespace {

// One input of a sample (use_nested_pipeline). Without a seed of its own it gets one
// derived from the sample's, so that two inputs do not shuffle alike.
DatasetPtr build_sample_input(const nlohmann::json& j, const std::string& path, size_t i,
                              BuildContext& ctx) {
  DatasetPtr input;
  use_nested_pipeline(j, path, [&](PipelineDef& d, const nlohmann::json& spec) {
    if (!spec.contains("seed")) d.seed(mix_seed(ctx.node_seed(), i) >> 1);
    if (!spec.contains("deterministic")) d.deterministic(ctx.deterministic);
    BuildOptions o;
    o.base_dir = ctx.base_dir;
    std::vector<DatasetPtr> nodes;
    input = d.build_nodes(o, "sample[" + std::to_string(i) + "]/", nodes);
  });
  return input;
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
  const std::string stop = s.get_string("stop");
  o.stop = stop == "first"   ? SampleOptions::Stop::kFirst
           : stop == "never" ? SampleOptions::Stop::kNever
                             : SampleOptions::Stop::kAll;
  o.seed = s.has("seed") ? static_cast<uint64_t>(s.get_int("seed")) : ctx.node_seed();
  o.input_field = s.get_string("input_field");
  std::vector<DatasetPtr> ds;
  for (size_t i = 0; i < inputs->size(); ++i)
    ds.push_back(build_sample_input((*inputs)[i], path + "[" + std::to_string(i) + "]", i, ctx));
  try {
    return make_sample(std::move(ds), std::move(o));
  } catch (const Error& e) {
    throw_spec_error(s.path(), e.message());
  }
}

// range and sample.
void register_core_sources(Registry& r) {
  r.add_source(
      {"sample",
       "Several pipelines mixed by weight, deterministic with its seed (docs/formats.md).",
       {{.name = "inputs",
         .type = OptionType::kJson,
         .required = true,
         .shape = "a list of pipelines {\"source\": ..., \"stages\": [...]} or sources "
                  "{\"kind\": ...}",
         .doc = "the pipelines to mix"},
        {.name = "weights",
         .type = OptionType::kJson,
         .default_text = "equal",
         .shape = "a list of numbers >= 0, one per input",
         .doc = "each input's share of the elements"},
        {.name = "stop",
         .type = OptionType::kString,
         .fallback = "all",
         .choices = {"first", "all", "never"},
         .doc = "when the mixture ends: when the first input ends, all have, or never "
                "(exhausted inputs restart)"},
        seed_option("the draws"),
        {.name = "input_field",
         .type = OptionType::kString,
         .fallback = "",
         .doc = "a field to add: the index of the input each element came from (\"\": none)"}}},
      build_sample);
  r.add_source({"range",
                "The integers 0..count-1 as field \"value\" (int64).",
                {{.name = "count", .required = true, .min = 0, .doc = "how many"},
                 {.name = "shards",
                  .fallback = 1,
                  .min = 1,
                  .max = 1 << 20,
                  .doc = "parts, like files, for interleave and shard"}}},
               [](SpecObject& s, BuildContext&) {
                 RangeOptions o;
                 o.count = s.get_int("count");
                 o.shards = s.get_int("shards");
                 return make_range(o);
               });
}

// map and filter.
void register_function_stages(Registry& r) {
  OpSchema map{"map", "Applies a registered function (\"fn\", with its \"args\") to every element.",
               function_options("function", "map functions")};
  map.options.insert(
      map.options.end(),
      {{.name = "parallelism",
        .type = OptionType::kIntOrAuto,
        .fallback = 1,
        .min = 1,
        .max = 256,
        .written = Written::kUnlessDefault,
        .doc = "threads (\"auto\": set by the tuner within the CPU budget)"},
       {.name = "deterministic",
        .type = OptionType::kBool,
        .default_text = "the pipeline's \"deterministic\"",
        .doc = "input order (true) or as finished (false)"},
       {.name = "buffer",
        .fallback = 0,
        .min = 0,
        .max = kMaxBufferElements,
        .doc = "elements finished ahead of the consumer (0: max(16, parallelism), growing for a "
               "cheap function of small elements to at most 1,024 elements and 1 MiB)"}});
  r.add_stage(std::move(map), [](SpecObject& s, DatasetPtr in, BuildContext& ctx) {
    MapOptions o;
    auto [name, fn] = function_builder(s, registry().map_fns, "map function");
    o.name = name;
    o.fn = fn;
    o.autotune = is_auto(s, "parallelism");
    if (!o.autotune) o.parallelism = static_cast<int>(s.get_int("parallelism"));
    o.deterministic = s.get_bool("deterministic", ctx.deterministic);
    o.buffer = s.get_int("buffer");
    o.seed = ctx.node_seed();
    return make_map(std::move(in), std::move(o));
  });
  r.add_stage({"filter", "Keeps the elements a registered predicate (\"fn\") accepts.",
               function_options("predicate", "filters")},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                auto [name, fn] = function_builder(s, registry().predicates, "predicate");
                return make_filter(std::move(in), name, fn);
              });
}

// interleave, shuffle and batch.
void register_order_stages(Registry& r) {
  r.add_stage({"interleave",
               "Reads `cycle` shards (files) at once, one element from each in turn; right after a "
               "source over several files. With `parallelism` \"auto\", one thread per open "
               "file, `buffer_per_shard` chosen by the tuner (the cycle sets the order: never "
               "tuned).",
               {{.name = "cycle",
                 .fallback = 4,
                 .min = 1,
                 .max = 1024,
                 .written = Written::kAlways,
                 .doc = "shards open at once"},
                {.name = "parallelism",
                 .type = OptionType::kIntOrAuto,
                 .fallback = -1,
                 .min = -1,
                 .max = 1024,
                 .doc = "reader threads (-1: one per open shard; 0: none, read on the consumer's "
                        "thread; \"auto\": one per shard, with buffer_per_shard tuned)"},
                {.name = "buffer_per_shard",
                 .fallback = 2,
                 .min = 1,
                 .max = 1 << 20,
                 .doc = "elements read ahead per open shard"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                InterleaveOptions o;
                o.cycle = s.get_int("cycle");
                o.autotune = is_auto(s, "parallelism");
                if (!o.autotune) o.parallelism = s.get_int("parallelism");
                o.buffer_per_shard = s.get_int("buffer_per_shard");
                if (in->shards().empty()) {
                  throw_spec_error(
                      s.path(),
                      "interleave needs an input with shards: put it right after a source "
                      "over several files (or a range with \"shards\")");
                }
                return make_interleave(std::move(in), o);
              });
  r.add_stage({"shuffle",
               "Shuffles through a buffer; after an example echo it keeps an element's copies "
               "out of one batch.",
               {{.name = "buffer",
                 .required = true,
                 .min = 1,
                 .max = kMaxBufferElements,
                 .doc = "elements held"},
                seed_option("the shuffle"),
                {.name = "reshuffle_each_iteration",
                 .type = OptionType::kBool,
                 .fallback = true,
                 .written = Written::kWhenGiven,
                 .doc = "a new order each pass over the input"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext& ctx) {
                ShuffleOptions o;
                o.buffer = s.get_int("buffer");
                o.seed = s.has("seed") ? static_cast<uint64_t>(s.get_int("seed")) : ctx.node_seed();
                o.reshuffle_each_iteration = s.get_bool("reshuffle_each_iteration");
                return make_shuffle(std::move(in), o);
              });
  r.add_stage(
      {"batch", "Stacks `size` elements into one: every tensor gets a leading batch dimension.",
       batch_options()},
      [](SpecObject& s, DatasetPtr in, BuildContext&) {
        BatchOptions o;
        o.size = s.get_int("size");
        o.drop_remainder = s.get_bool("drop_remainder");
        return make_batch(std::move(in), o);
      });
}

// prefetch, repeat, take, skip and shard.
void register_flow_stages(Registry& r) {
  r.add_stage({"prefetch",
               "Runs everything before it on a thread of its own, `buffer` elements ahead.",
               {{.name = "buffer",
                 .type = OptionType::kIntOrAuto,
                 .fallback = 2,
                 .min = 1,
                 .max = 1 << 20,
                 .written = Written::kAlways,
                 .doc = "elements ahead (\"auto\": sized by the tuner within the RAM "
                        "budget)"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                PrefetchOptions o;
                o.autotune = is_auto(s, "buffer");
                if (!o.autotune) o.buffer = s.get_int("buffer");
                return make_prefetch(std::move(in), o);
              });
  r.add_stage({"repeat",
               "Passes over the input `count` times; epochs are stamped on rows.",
               {{.name = "count",
                 .fallback = -1,
                 .min = -1,
                 .written = Written::kAlways,
                 .doc = "passes (-1: forever)"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                return make_repeat(std::move(in), s.get_int("count"));
              });
  r.add_stage({"take",
               "The first `count` elements.",
               {{.name = "count", .required = true, .min = 0, .doc = "elements kept"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                return make_take(std::move(in), s.get_int("count"));
              });
  r.add_stage({"skip",
               "All but the first `count` elements.",
               {{.name = "count", .required = true, .min = 0, .doc = "elements dropped"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                return make_skip(std::move(in), s.get_int("count"));
              });
  r.add_stage({"shard",
               "One worker's share: whole files right after a source over at least `num_shards` "
               "files, else every `num_shards`-th element from `index`.",
               {{.name = "num_shards", .required = true, .min = 1, .doc = "shares"},
                {.name = "index", .required = true, .min = 0, .doc = "this share, < num_shards"}}},
              [](SpecObject& s, DatasetPtr in, BuildContext&) {
                int64_t n = s.get_int("num_shards");
                int64_t index = s.get_int("index", std::nullopt, 0, n - 1);
                return make_shard(std::move(in), n, index);
              });
}

// elastic: declared here, built by PipelineDef::build_nodes when it is the first stage
// (src/spec/elastic_build.h); anywhere else it is refused.
void register_elastic_stage(Registry& r) {
  r.add_stage({"elastic",
               "Splits the data between ranks so that a job can resume on another number of "
               "ranks (include/dataecho/ops/elastic.h): the stages before the "
               "batch run once per lane over `lanes` lanes of balanced pieces of the source, "
               "rank `rank` of `world_size` owns the lanes k with k mod world_size == rank, "
               "and the batch's size is the global batch of all ranks. The first stage; "
               "PipelineDef::with_elastic_first puts it there.",
               {{.name = "lanes",
                 .fallback = 12,
                 .min = 1,
                 .max = 4096,
                 .written = Written::kAlways,
                 .doc = "lanes, fixed for the job; world_size must divide it"},
                {.name = "pieces_per_lane",
                 .fallback = 4,
                 .min = 1,
                 .max = 1024,
                 .doc = "pieces of the source each lane reads per epoch (an in-lane "
                        "interleave's slots)"},
                {.name = "world_size",
                 .fallback = 1,
                 .min = 1,
                 .max = 4096,
                 .doc = "ranks (not part of the state's fingerprint)"},
                {.name = "rank",
                 .fallback = 0,
                 .min = 0,
                 .max = 4095,
                 .doc = "this rank, < world_size (not part of the state's fingerprint)"},
                {.name = "consumers_per_rank",
                 .fallback = 1,
                 .min = 1,
                 .max = 4096,
                 .doc = "consumers of the rank's batches (DataLoader workers): consumer w "
                        "acts as consumer rank + world_size * w of world_size * "
                        "consumers_per_rank with a global batch consumers_per_rank times "
                        "the batch's size, so that each of its batches has the rank's share "
                        "of rows; world_size * consumers_per_rank must divide lanes (not "
                        "part of the state's fingerprint)"},
                {.name = "consumer",
                 .fallback = 0,
                 .min = 0,
                 .max = 4095,
                 .doc = "this consumer, < consumers_per_rank (not part of the state's "
                        "fingerprint)"},
                {.name = "lane_counts",
                 .type = OptionType::kBool,
                 .fallback = false,
                 .doc = "add to each batch the int64 field __lanes__ [L, 2]: each lane the "
                        "consumer owns and its elements in the consumer's batches so far (a "
                        "DataLoader's snapshot and skip; not part of the state's "
                        "fingerprint)"},
                {.name = "seed",
                 .min = 0,
                 .default_text = "derived from the pipeline's seed",
                 .doc = "the seed of the deal of pieces to lanes (each epoch deals anew)"}}},
              [](SpecObject& s, DatasetPtr, BuildContext&) -> DatasetPtr {
                throw_spec_error(s.path(),
                                 "elastic must be the pipeline's first stage "
                                 "(PipelineDef::with_elastic_first puts it there)");
              });
}

}  // namespace

void register_core_builders(Registry& r) {
  register_core_sources(r);
  register_function_stages(r);
  register_order_stages(r);
  register_flow_stages(r);
  register_elastic_stage(r);
}

}  // namespace dataecho
