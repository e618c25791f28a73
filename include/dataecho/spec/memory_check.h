// Arming the memory check of a pipeline's buffers as it is built (core/memory_watch.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "dataecho/core/dataset.h"
#include "dataecho/core/memory_watch.h"

namespace dataecho {

// The least size in bytes of the elements at a point of the chain, where the spec fixes
// it, and why ("decode_augment's random_resized_crop, float32, at least one channel").
using KnownSize = std::optional<std::pair<double, std::string>>;

// For the stage `stage` (its canonical JSON) that reads `in` and is `out`: a watch on the
// elements it holds, when it holds many (shuffle, prefetch, a map's buffer), checked at
// once where `known` gives their size and else on the first elements; `known` becomes
// the size after the stage.
void arm_memory_watch(const nlohmann::json& stage, const DatasetPtr& in, const DatasetPtr& out,
                      const MemoryCheckOptions& options, KnownSize& known);

}  // namespace dataecho
