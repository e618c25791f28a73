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
    return reg;
  }();
  return r;
}

std::mutex& registration_mutex() {
  static std::mutex m;
  return m;
}

template <class Map, class Builder>
void add(Map& map, const std::string& name, Builder builder, const char* what) {
  if (name.empty())
    throw_error(ErrorCode::kInvalidArgument, "registry", std::string(what) + ": empty name");
  if (!builder)
    throw_error(ErrorCode::kInvalidArgument, "registry",
                std::string(what) + " \"" + name + "\": no builder given");
  if (map.count(name))
    throw_error(ErrorCode::kInvalidArgument, "registry",
                std::string(what) + " \"" + name + "\" is registered already");
  map.emplace(name, std::move(builder));
}

}  // namespace

const Registry& registry() { return the_registry(); }

void register_map_function(const std::string& name, MapFnBuilder builder, MapFnTraits traits) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  Registry& r = the_registry();
  add(r.map_fns, name, std::move(builder), "map function");
  r.map_fn_traits[name] = traits;
}

void register_filter(const std::string& name, PredicateBuilder builder) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  add(the_registry().predicates, name, std::move(builder), "filter predicate");
}

void register_stage(const std::string& op, StageBuilder builder) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  add(the_registry().stages, op, std::move(builder), "stage op");
}

void register_source(const std::string& kind, SourceBuilder builder) {
  std::lock_guard<std::mutex> lock(registration_mutex());
  add(the_registry().sources, kind, std::move(builder), "source kind");
}

}  // namespace dataecho
