#include "dataecho/train/memory_pipeline.h"

#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/spec_reader.h"

namespace dataecho::train {

std::unique_ptr<Pipeline> build_memory_pipeline(
    std::shared_ptr<const std::vector<Example>> examples, const nlohmann::json& stages,
    uint64_t seed) {
  if (!stages.is_array()) throw_spec_error("$.stages", "expected a list of stages");
  PipelineDef def = PipelineDef::from_dataset(
      make_memory_source(*examples, /*keep_ids=*/true),
      "memory:" + std::to_string(examples->size()) + ":" + std::to_string(seed));
  def.seed(seed);
  for (size_t i = 0; i < stages.size(); ++i) {
    SpecObject st(stages[i], "$.stages[" + std::to_string(i) + "]");
    nlohmann::json options = stages[i];
    options.erase("op");
    def.stage(st.get_string("op"), std::move(options));
  }
  return def.build();
}

}  // namespace dataecho::train
