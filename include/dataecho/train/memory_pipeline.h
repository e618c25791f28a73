// A pipeline over examples held in memory, with stages from a spec's "stages" list: for
// tests, benchmarks and callers that already have their data (the spec language has no
// in-memory source). The stages are built by the same registry as build_pipeline, so
// every op (shuffle, echo, map, batch, ...) behaves as in a spec. Thread-safety: plain
// function; the pipeline is as documented in pipeline.h.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/pipeline.h"

namespace dataecho::train {

// `stages` is a JSON list as in a spec; `seed` plays the spec's "seed". The examples
// are shared (tensors are immutable), so one vector can feed many pipelines.
std::unique_ptr<Pipeline> build_memory_pipeline(
    std::shared_ptr<const std::vector<Example>> examples, const nlohmann::json& stages,
    uint64_t seed = 0);

}  // namespace dataecho::train
