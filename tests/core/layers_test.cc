// The layers, enforced: an #include in src/ or include/ may reach its own layer or one
// below it, never one above. The order, lowest first (README, Architecture):
//   core (and dataset.h, pipeline.h) < ops < io < formats < image < tools < spec
//   (and the entry header dataecho.h) < train < cli; and python (the extension), which
//   reaches the engine but never train or cli (it must not link LibTorch).
// Linking cannot catch an upward include, as every public header lives under one
// include/dataecho/ root; this test reads every include edge of the tree instead.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace dataecho::testing {
namespace {

namespace fs = std::filesystem;

// python: the Python extension (src/python), on the engine only, never on the trainer.
const std::vector<std::string> kLayers = {"core",  "ops",  "io",    "formats", "image",
                                          "tools", "spec", "train", "cli",     "python"};

std::optional<size_t> rank_of(const std::string& layer) {
  auto it = std::find(kLayers.begin(), kLayers.end(), layer);
  if (it == kLayers.end()) return std::nullopt;
  return static_cast<size_t>(it - kLayers.begin());
}

// The layer of a header named "dataecho/..." (relative to include/).
std::string public_layer(const std::vector<std::string>& parts) {
  if (parts.size() == 2) {  // dataecho/x.h
    if (parts[1] == "dataset.h" || parts[1] == "pipeline.h") return "core";
    return "spec";  // dataecho.h: the engine's entry header
  }
  if (parts[1] == "proto") return "formats";  // the generated tf.Example messages
  return parts[1];
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(path)) parts.push_back(p.string());
  return parts;
}

// Every include of a file of `root`'s src/ and include/ that reaches a layer above the
// file's own, as "file:line: includes "x" (from layer a up to layer b)".
std::vector<std::string> upward_includes(const fs::path& root) {
  std::vector<std::string> found;
  const std::regex include_re(R"(^\s*#\s*include\s*"([^"]+)\")");
  for (const char* top : {"src", "include"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      const auto parts = split(rel);
      const std::string layer =
          parts[0] == "src" ? parts[1] : public_layer({parts.begin() + 1, parts.end()});
      const auto from = rank_of(layer);
      if (!from) continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include_re)) continue;
        const std::string inc = m[1];
        const auto ip = split(inc);
        std::string target;
        if (ip.size() >= 2 && ip[0] == "dataecho")
          target = public_layer(ip);
        else if (ip.size() >= 2 && rank_of(ip[0]))
          target = ip[0];  // "core/block_cache.h": src/-relative
        else
          continue;  // a header of the same folder
        const auto to = rank_of(target);
        // The Python extension sits on the engine: it must not pull in LibTorch.
        const bool python_on_trainer = layer == "python" && (target == "train" || target == "cli");
        if ((to && *to > *from) || python_on_trainer)
          found.push_back(rel + ":" + std::to_string(n) + ": includes \"" + inc +
                          "\" (from layer " + layer + " up to layer " + target + ")");
      }
    }
  }
  return found;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(Layers, NoIncludeReachesUp) {
  const auto found = upward_includes(DATAECHO_SOURCE_DIR);
  EXPECT_TRUE(found.empty()) << "includes that reach up the layer order:\n" << joined(found);
}

TEST(Layers, TheCheckFindsAnUpwardIncludeAndOnlyThat) {
  const fs::path root =
      fs::temp_directory_path() / ("dataecho_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("include/dataecho/core/tensor.h",
        "#include <vector>\n#include \"dataecho/core/error.h\"\n");
  write("src/ops/map.cc", "#include \"dataecho/ops/map.h\"\n#include \"worker_pause.h\"\n");
  write("src/spec/build.cc",
        "#include \"dataecho/image/codec.h\"\n#include \"ops/map_and_batch.h\"\n");
  write("include/dataecho/dataecho.h", "#include \"dataecho/spec/build.h\"\n");
  EXPECT_TRUE(upward_includes(root).empty()) << joined(upward_includes(root));
  // image reaching up to spec, and core (pipeline.h) to ops: both named, with the line.
  write("src/image/image_functions.cc",
        "#include \"dataecho/image/codec.h\"\n#include \"dataecho/spec/registry.h\"\n");
  write("include/dataecho/pipeline.h", "  #  include \"ops/batch_builder.h\"\n");
  auto found = upward_includes(root);
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), 2u) << joined(found);
  EXPECT_EQ(found[0],
            "include/dataecho/pipeline.h:1: includes \"ops/batch_builder.h\" (from layer core up "
            "to layer ops)");
  EXPECT_EQ(found[1],
            "src/image/image_functions.cc:2: includes \"dataecho/spec/registry.h\" (from layer "
            "image up to layer spec)");
  fs::remove_all(root);
}

}  // namespace
}  // namespace dataecho::testing
