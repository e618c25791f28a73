// A pipeline nested in a source's options: a `sample`'s inputs, a `service` source's
// upstream. Internal to src/spec.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "dataecho/spec/pipeline_def.h"

namespace dataecho {

// Reads `j`, a pipeline spec {"source": ..., "stages": [...]} or a source object alone
// {"kind": ...}, at `path` ($.source.inputs[1]), and hands the definition and its spec to
// `use`; a spec error of either names its field under `path`
// ($.source.inputs[1].stages[0].size), any other error is a spec error at `path`.
void use_nested_pipeline(
    const nlohmann::json& j, const std::string& path,
    const std::function<void(PipelineDef& d, const nlohmann::json& spec)>& use);

}  // namespace dataecho
