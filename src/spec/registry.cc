#include "dataecho/spec/registry.h"

#include "dataecho/core/rng.h"

namespace dataecho {

uint64_t BuildContext::node_seed() const {
  return mix_seed(seed, static_cast<uint64_t>(node_index));
}

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_core_builders(reg);
    register_builtin_functions(reg);
    register_echo_builders(reg);
    register_format_builders(reg);
    register_image_functions(reg);
    return reg;
  }();
  return r;
}

}  // namespace dataecho
