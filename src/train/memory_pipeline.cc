#include "dataecho/train/memory_pipeline.h"

#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho::train {

std::unique_ptr<Pipeline> build_memory_pipeline(
    std::shared_ptr<const std::vector<Example>> examples, const nlohmann::json& stages,
    uint64_t seed) {
  PipelineDef def = PipelineDef::from_dataset(
      make_memory_source(*examples, /*keep_ids=*/true),
      "memory:" + std::to_string(examples->size()) + ":" + std::to_string(seed));
  def.seed(seed);
  for (StageDef& s : PipelineDef::stages_from_json(stages))
    def.stage(std::move(s.op), std::move(s.options));
  return def.build();
}

}  // namespace dataecho::train
