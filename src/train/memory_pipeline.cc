#include "dataecho/train/memory_pipeline.h"

#include "dataecho/ops/sources.h"
#include "dataecho/spec/registry.h"

namespace dataecho::train {

std::unique_ptr<Pipeline> build_memory_pipeline(
    std::shared_ptr<const std::vector<Example>> examples, const nlohmann::json& stages,
    uint64_t seed) {
  if (!stages.is_array()) throw_spec_error("$.stages", "expected a list of stages");
  std::vector<DatasetPtr> nodes;
  auto attach = [&](const DatasetPtr& ds, int64_t index) {
    std::string label = std::to_string(index) + ":" + ds->op_name();
    std::const_pointer_cast<Dataset>(ds)->attach(
        label, std::make_shared<NodeStats>(label, ds->owns_threads()));
    nodes.push_back(ds);
  };
  DatasetPtr ds = make_memory_source(*examples, /*keep_ids=*/true);
  attach(ds, 0);
  BuildContext ctx;
  ctx.seed = seed;
  const Registry& reg = registry();
  for (size_t i = 0; i < stages.size(); ++i) {
    SpecObject st(stages[i], "$.stages[" + std::to_string(i) + "]");
    std::string op = st.get_string("op");
    auto b = reg.stages.find(op);
    if (b == reg.stages.end()) throw_spec_error(st.field_path("op"), "unknown op \"" + op + "\"");
    ctx.node_index = static_cast<int64_t>(i) + 1;
    ds = b->second(st, ds, ctx);
    st.finish();
    attach(ds, ctx.node_index);
  }
  std::string fingerprint = "memory:" + std::to_string(examples->size()) + ":" +
                            std::to_string(seed) + ":" + stages.dump();
  return std::make_unique<Pipeline>(ds, std::move(nodes), fingerprint);
}

}  // namespace dataecho::train
