// The names a spec may use: source kinds, stage ops, map functions and filter
// predicates, each with a builder. Every layer registers its own in one function
// (register_core_builders, register_echo_builders, ...), called once by registry().
// Thread-safety: filled once on first use, read-only afterwards.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/dataset.h"
#include "dataecho/ops/basic.h"
#include "dataecho/ops/map.h"
#include "dataecho/spec/schema.h"
#include "dataecho/spec/spec_reader.h"

namespace dataecho {

// What a builder knows about the pipeline it is part of.
struct BuildContext {
  uint64_t seed = 0;          // the spec's seed
  bool deterministic = true;  // the spec's default for parallel stages
  std::string base_dir;       // relative paths in the spec are relative to this
  int64_t node_index = 0;     // position of the node being built
  // The canonical definition being built (its JSON: "seed", "source", "stages"; only
  // "stages" for a definition over a dataset, whose source is `source_fingerprint`):
  // what a stage may know of everything upstream of it (the cache's key).
  const nlohmann::json* canonical = nullptr;
  std::string source_fingerprint;
  uint64_t node_seed() const;  // a seed of its own for this node
};

using SourceBuilder = std::function<DatasetPtr(SpecObject& spec, BuildContext& ctx)>;
using StageBuilder =
    std::function<DatasetPtr(SpecObject& spec, DatasetPtr input, BuildContext& ctx)>;
// `args` is the stage's "args" object: read every option from it, then it is finished.
using MapFnBuilder = std::function<MapFn(SpecObject& args)>;
using PredicateBuilder = std::function<Predicate(SpecObject& args)>;

// What a map function is, for the tools that edit pipelines (the experiment runner
// places an echo before or after the augmentation by these, not by function names).
struct MapFnTraits {
  bool augmentation = false;  // random per element and per echo copy (augment)
  bool decodes = false;       // turns encoded bytes into an image (decode_image)
};

struct Registry {
  std::map<std::string, SourceBuilder> sources;
  std::map<std::string, StageBuilder> stages;
  std::map<std::string, MapFnBuilder> map_fns;
  std::map<std::string, MapFnTraits> map_fn_traits;  // absent: neither
  std::map<std::string, PredicateBuilder> predicates;
  // The declarations of their options (schema.h), by the same names; every built-in
  // has one, an extension may.
  std::map<std::string, OpSchema> source_schemas, stage_schemas, map_fn_schemas, predicate_schemas;

  // A built-in and its declaration, under the declaration's name.
  void add_source(OpSchema schema, SourceBuilder builder);
  void add_stage(OpSchema schema, StageBuilder builder);
  void add_map_fn(OpSchema schema, MapFnBuilder builder, MapFnTraits traits = {});
  void add_predicate(OpSchema schema, PredicateBuilder builder);
  // The declaration of a name in one of the schema maps, or null.
  static const OpSchema* find(const std::map<std::string, OpSchema>& schemas,
                              const std::string& name) {
    auto it = schemas.find(name);
    return it == schemas.end() ? nullptr : &it->second;
  }

  MapFnTraits traits_of(const std::string& map_fn) const {
    auto it = map_fn_traits.find(map_fn);
    return it == map_fn_traits.end() ? MapFnTraits{} : it->second;
  }
};

const Registry& registry();

// "a, b, c": the names a registry map knows, for "unknown ..." errors.
template <class Map>
std::string known_names(const Map& map) {
  std::string s;
  for (const auto& [k, v] : map) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// `unknown WHAT "name"; did you mean "x"? (known: a, b, c)`.
template <class Map>
std::string unknown_name(const std::string& what, const std::string& name, const Map& map) {
  std::vector<std::string> names;
  for (const auto& [k, v] : map) names.push_back(k);
  return "unknown " + what + " \"" + name + "\"" + did_you_mean(name, names) +
         " (known: " + known_names(map) + ")";
}

// Extension points: a map function, filter predicate, stage op or source kind of one's
// own, usable from the fluent builder and from JSON specs alike. The builder receives the
// stage's "args" (a source or op: its whole object) as a SpecObject: what it reads with
// the typed getters is its argument schema, and any other argument is refused with its
// JSON path ($.stages[1].args.scale: ...). A name already taken (built in or registered)
// is refused. Register at start-up, before building pipelines: registration is
// serialized, but building reads the registry without a lock.
// With a declaration (`schema`, named as `name`), the builder's getters take the declared
// defaults and bounds, and its options appear in `dataecho spec`.
void register_map_function(const std::string& name, MapFnBuilder builder, MapFnTraits traits = {},
                           std::optional<OpSchema> schema = std::nullopt);
void register_filter(const std::string& name, PredicateBuilder builder,
                     std::optional<OpSchema> schema = std::nullopt);
void register_stage(const std::string& op, StageBuilder builder,
                    std::optional<OpSchema> schema = std::nullopt);
void register_source(const std::string& kind, SourceBuilder builder,
                     std::optional<OpSchema> schema = std::nullopt);
// Every declaration of the registry as JSON: {"pipeline": ..., "sources": [...],
// "stages": [...], "map_functions": [...], "filters": [...]} (`dataecho spec`).
nlohmann::json registry_schema();
// The top level of a spec: "seed", "deterministic", "autotune", "memory_check", "source",
// "stages", "name", "comment".
const OpSchema& pipeline_schema();

// Registration functions of each layer.
void register_core_builders(Registry& r);
void register_builtin_functions(Registry& r);
void register_echo_builders(Registry& r);
void register_format_builders(Registry& r);
void register_cache_builders(Registry& r);
void register_image_functions(Registry& r);
void register_sequence_builders(Registry& r);
void register_service_builders(Registry& r);

}  // namespace dataecho
