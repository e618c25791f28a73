#include "dataecho/spec/build.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "dataecho/io/byte_stream.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

std::string known_names(const auto& map) {
  std::string s;
  for (const auto& [k, v] : map) s += (s.empty() ? "" : ", ") + k;
  return s;
}

void attach(const DatasetPtr& ds, int64_t index, std::vector<DatasetPtr>& nodes) {
  auto* mutable_ds = const_cast<Dataset*>(ds.get());  // still private to the builder here
  std::string label = std::to_string(index) + ":" + ds->op_name();
  mutable_ds->attach(label, std::make_shared<NodeStats>(label, ds->owns_threads()));
  nodes.push_back(ds);
}

}  // namespace

std::unique_ptr<Pipeline> build_pipeline(const nlohmann::json& spec, const BuildOptions& options) {
  SpecObject top(spec, "$");
  BuildContext ctx;
  int64_t seed = top.get_int("seed", 0, 0);
  ctx.seed = static_cast<uint64_t>(seed);
  ctx.deterministic = top.get_bool("deterministic", true);
  ctx.base_dir = options.base_dir;
  top.raw("name");
  top.raw("comment");

  const Registry& reg = registry();
  std::vector<DatasetPtr> nodes;

  SpecObject src = top.get_object("source", true);
  std::string kind = src.get_string("kind");
  auto sb = reg.sources.find(kind);
  if (sb == reg.sources.end())
    throw_spec_error(src.field_path("kind"), "unknown source kind \"" + kind +
                                                 "\" (known: " + known_names(reg.sources) + ")");
  ctx.node_index = 0;
  DatasetPtr ds = sb->second(src, ctx);
  src.finish();
  attach(ds, 0, nodes);

  const nlohmann::json* stages = top.raw("stages");
  if (stages && !stages->is_array())
    throw_spec_error("$.stages",
                     std::string("expected a list of stages, got ") + stages->type_name());
  if (stages) {
    for (size_t i = 0; i < stages->size(); ++i) {
      SpecObject st((*stages)[i], "$.stages[" + std::to_string(i) + "]");
      std::string op = st.get_string("op");
      auto b = reg.stages.find(op);
      if (b == reg.stages.end())
        throw_spec_error(st.field_path("op"),
                         "unknown op \"" + op + "\" (known: " + known_names(reg.stages) + ")");
      ctx.node_index = static_cast<int64_t>(i) + 1;
      try {
        ds = b->second(st, ds, ctx);
      } catch (const Error& e) {
        if (e.stage() == "spec") throw;
        throw_spec_error(st.path(), e.what());
      }
      st.finish();
      attach(ds, ctx.node_index, nodes);
    }
  }
  top.finish();
  std::string fingerprint = std::to_string(std::hash<std::string>{}(spec.dump()));
  return std::make_unique<Pipeline>(ds, std::move(nodes), fingerprint);
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

std::unique_ptr<Pipeline> build_pipeline_from_file(const std::string& path) {
  BuildOptions o;
  if (path != "-") {
    auto slash = path.find_last_of('/');
    if (slash != std::string::npos) o.base_dir = path.substr(0, slash);
  }
  return build_pipeline(load_spec_file(path), o);
}

std::string resolve_spec_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty() || is_http_uri(path) ||
      path.rfind("file://", 0) == 0)
    return path;
  return base_dir + "/" + path;
}

}  // namespace dataecho
