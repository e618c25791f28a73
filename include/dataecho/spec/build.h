// Building a Pipeline from its JSON spec (README.md, "A pipeline in one JSON document").
// The whole spec is validated before any node runs; an error names the JSON path and
// what was expected.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dataecho/core/memory_watch.h"
#include "dataecho/core/pipeline.h"

namespace dataecho {

struct BuildOptions {
  std::string base_dir;  // for relative paths in the spec; "" = current directory
  // The map-and-batch fusion rewrite (src/ops/map_and_batch.h): off only to measure it.
  bool map_and_batch_fusion = true;
  // The tuner of "auto" settings (core/tuner.h): its windows and intervals, and budgets
  // that the spec's "autotune" object overrides.
  TunerOptions tuning = {};
  // The check of the buffers against memory (core/memory_watch.h), which the spec's
  // "memory_check" object overrides.
  MemoryCheckOptions memory_check = {};
};

std::unique_ptr<Pipeline> build_pipeline(const nlohmann::json& spec,
                                         const BuildOptions& options = {});
// Parses JSON text ("-" reads standard input when given as a path below).
nlohmann::json parse_spec_text(const std::string& text, const std::string& origin);
nlohmann::json load_spec_file(const std::string& path);
// Relative paths in the file are relative to its folder (unless options.base_dir is set).
std::unique_ptr<Pipeline> build_pipeline_from_file(const std::string& path,
                                                   BuildOptions options = {});

// A fixed hash of a spec's canonical text: "fnv1a64:" and 16 hex digits (64-bit FNV-1a,
// which does not depend on the compiler's std::hash): the state fingerprint, a disk
// cache's key.
std::string spec_fingerprint(const std::string& canonical_text);

// A path named in a spec, as seen from the spec's folder `base_dir`: unchanged when it
// is absolute, a URL (http(s)://, file://) or base_dir is empty; else base_dir/path.
std::string resolve_spec_path(const std::string& base_dir, const std::string& path);

}  // namespace dataecho
