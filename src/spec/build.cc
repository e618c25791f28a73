#include "dataecho/spec/build.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "dataecho/io/byte_stream.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho {

// One path for every pipeline: the spec becomes a PipelineDef, which builds it.
std::unique_ptr<Pipeline> build_pipeline(const nlohmann::json& spec, const BuildOptions& options) {
  return PipelineDef::from_json(spec).build(options);
}

nlohmann::json parse_spec_text(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kInvalidArgument, "spec", std::string("not valid JSON: ") + e.what(),
                origin);
  }
}

nlohmann::json load_spec_file(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream f(path);
    if (!f) throw Error(ErrorCode::kNotFound, "spec", "cannot open spec file", path);
    ss << f.rdbuf();
  }
  return parse_spec_text(ss.str(), path == "-" ? "standard input" : path);
}

std::unique_ptr<Pipeline> build_pipeline_from_file(const std::string& path, BuildOptions o) {
  if (path != "-" && o.base_dir.empty()) {
    auto slash = path.find_last_of('/');
    if (slash != std::string::npos) o.base_dir = path.substr(0, slash);
  }
  return build_pipeline(load_spec_file(path), o);
}

std::string resolve_spec_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty() || is_remote_uri(path) ||
      path.rfind("file://", 0) == 0)
    return path;
  return base_dir + "/" + path;
}

}  // namespace dataecho
