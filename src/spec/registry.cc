#include "dataecho/spec/registry.h"

#include <mutex>

#include "dataecho/core/error.h"
#include "dataecho/core/rng.h"

namespace dataecho {

uint64_t BuildContext::node_seed() const {
  return mix_seed(seed, static_cast<uint64_t>(node_index));
}

namespace {

Registry& the_registry() {
  static Registry r = [] {
    Registry reg;
    register_core_builders(reg);
    register_builtin_functions(reg);
    register_echo_builders(reg);
    register_format_builders(reg);
    register_cache_builders(reg);
    register_image_functions(reg);
    register_sequence_builders(reg);
    register_service_builders(reg);
    return reg;
  }();
  return r;
}

std::mutex& registration_mutex() {
  static std::mutex m;
  return m;
}

// The builder with its options declared on the object it reads: whoever calls a
// registered builder reads by the declaration.
template <class Builder>
Builder declaring(const OpSchema* schema, Builder builder) {
  return [schema, builder = std::move(builder)](SpecObject& s, auto&&... rest) {
    s.declare(*schema);
    return builder(s, std::forward<decltype(rest)>(rest)...);
  };
}

// An extension's builder under `name`, with its declaration (when given, named as it is
// registered) in `schemas`; a name already taken is refused.
template <class Map, class Builder>
void add(Map& map, std::map<std::string, OpSchema>& schemas, const std::string& name,
         Builder builder, std::optional<OpSchema> schema, const char* what) {
  if (name.empty())
    throw_error(ErrorCode::kInvalidArgument, "registry", std::string(what) + ": empty name");
  if (!builder)
    throw_error(ErrorCode::kInvalidArgument, "registry",
                std::string(what) + " \"" + name + "\": no builder given");
  if (map.count(name))
    throw_error(ErrorCode::kInvalidArgument, "registry",
                std::string(what) + " \"" + name + "\" is registered already");
  if (schema) {
    schema->name = name;
    builder = declaring(&(schemas[name] = std::move(*schema)), std::move(builder));
  }
  map.emplace(name, std::move(builder));
}

nlohmann::json schema_list(const std::map<std::string, OpSchema>& schemas) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [name, s] : schemas) j.push_back(to_json(s));
  return j;
}

}  // namespace

void Registry::add_source(OpSchema schema, SourceBuilder builder) {
  const std::string name = schema.name;
  sources[name] = declaring(&(source_schemas[name] = std::move(schema)), std::move(builder));
}
void Registry::add_stage(OpSchema schema, StageBuilder builder) {
  const std::string name = schema.name;
  stages[name] = declaring(&(stage_schemas[name] = std::move(schema)), std::move(builder));
}
void Registry::add_map_fn(OpSchema schema, MapFnBuilder builder, MapFnTraits traits) {
  const std::string name = schema.name;
  map_fn_traits[name] = traits;
  map_fns[name] = declaring(&(map_fn_schemas[name] = std::move(schema)), std::move(builder));
}
void Registry::add_predicate(OpSchema schema, PredicateBuilder builder) {
  const std::string name = schema.name;
  predicates[name] = declaring(&(predicate_schemas[name] = std::move(schema)), std::move(builder));
}

const Registry& registry() { return the_registry(); }

void register_map_function(const std::string& name, MapFnBuilder builder, MapFnTraits traits,
                           std::optional<OpSchema> schema) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  Registry& r = the_registry();
  add(r.map_fns, r.map_fn_schemas, name, std::move(builder), std::move(schema), "map function");
  r.map_fn_traits[name] = traits;
}

void register_filter(const std::string& name, PredicateBuilder builder,
                     std::optional<OpSchema> schema) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  Registry& r = the_registry();
  add(r.predicates, r.predicate_schemas, name, std::move(builder), std::move(schema),
      "filter predicate");
}

void register_stage(const std::string& op, StageBuilder builder, std::optional<OpSchema> schema) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  Registry& r = the_registry();
  add(r.stages, r.stage_schemas, op, std::move(builder), std::move(schema), "stage op");
}

void register_source(const std::string& kind, SourceBuilder builder,
                     std::optional<OpSchema> schema) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  Registry& r = the_registry();
  add(r.sources, r.source_schemas, kind, std::move(builder), std::move(schema), "source kind");
}

const OpSchema& pipeline_schema() {
  static const OpSchema schema{
      "pipeline",
      "A pipeline spec's top level: a source, its stages and the settings of the whole.",
      {{.name = "source",
        .type = OptionType::kJson,
        .required = true,
        .shape = "an object {\"kind\": ..., options}",
        .doc = "where the elements come from"},
       {.name = "stages",
        .type = OptionType::kJson,
        .default_text = "none",
        .shape = "a list of objects {\"op\": ..., options}",
        .doc = "the stages, in order"},
       {.name = "seed",
        .fallback = 0,
        .min = 0,
        .doc = "every random stage derives its own seed from it"},
       {.name = "deterministic",
        .type = OptionType::kBool,
        .fallback = true,
        .doc = "the default order of parallel stages: input order (true) or as finished"},
       {.name = "autotune",
        .type = OptionType::kObject,
        .fields = {{.name = "cpu_budget",
                    .type = OptionType::kNumber,
                    .min = 0.01,
                    .default_text = "$DATAECHO_CPU_BUDGET, else all cores",
                    .doc = "cores the tuner may use"},
                   {.name = "ram_budget_mb",
                    .type = OptionType::kNumber,
                    .min = 1,
                    .default_text = "$DATAECHO_RAM_BUDGET_MB, else 1/8 of physical memory",
                    .doc = "MiB of buffers the tuner may use"},
                   {.name = "remember",
                    .type = OptionType::kBool,
                    .fallback = true,
                    .doc = "start from what the last tuner of the same definition chose"}},
        .doc = "the budgets of the tuner that sets \"auto\" settings (core/tuner.h)"},
       {.name = "memory_check",
        .type = OptionType::kObject,
        .fields = {{.name = "share",
                    .type = OptionType::kNumber,
                    .min = 1e-6,
                    .max = 1,
                    .default_text = "1/8",
                    .doc = "share of physical memory the buffers may fill"},
                   {.name = "limit_mb",
                    .type = OptionType::kNumber,
                    .min = 1e-6,
                    .default_text = "none",
                    .doc = "MiB the buffers may fill"},
                   {.name = "action",
                    .type = OptionType::kString,
                    .fallback = "warn",
                    .choices = {"warn", "error", "off"},
                    .doc = "what a buffer projected beyond it does"}},
        .doc = "the check of the buffers against memory (core/memory_watch.h)"},
       {.name = "name", .type = OptionType::kJson, .shape = "any value", .doc = "kept, not read"},
       {.name = "comment",
        .type = OptionType::kJson,
        .shape = "any value",
        .doc = "kept, not read"}}};
  return schema;
}

nlohmann::json registry_schema() {
  const Registry& r = registry();
  return {{"pipeline", to_json(pipeline_schema())},
          {"sources", schema_list(r.source_schemas)},
          {"stages", schema_list(r.stage_schemas)},
          {"map_functions", schema_list(r.map_fn_schemas)},
          {"filters", schema_list(r.predicate_schemas)}};
}

}  // namespace dataecho
