// The layers, enforced: an #include in src/ or include/ may reach its own layer or one
// below it, never one above. The order, lowest first (README, Architecture):
//   core < ops < io < image < formats < service < spec (and the entry header
//   dataecho.h) < train < cli; and python (the extension), which reaches the engine but never train
//   or cli (it must not link LibTorch).
// Linking cannot catch an upward include, as every public header lives under one
// include/dataecho/ root; this test reads every include edge of the tree instead. It
// also checks that no file includes another layer's private header (src/<layer>/*.h),
// and that each engine layer's target links exactly what its files include: the layers
// it includes headers of, and the third-party libraries whose headers it includes
// (CMakeLists.txt writes the links to layer_links.txt). gRPC's headers (grpcpp/) appear
// only in the gRPC plugin (src/service/grpc_plugin/), which no program links.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace dataecho::testing {
namespace {

namespace fs = std::filesystem;

// python: the Python extension (src/python), on the engine only, never on the trainer.
const std::vector<std::string> kLayers = {"core",    "ops",  "io",    "image", "formats",
                                          "service", "spec", "train", "cli",   "python"};

std::optional<size_t> rank_of(const std::string& layer) {
  auto it = std::find(kLayers.begin(), kLayers.end(), layer);
  if (it == kLayers.end()) return std::nullopt;
  return static_cast<size_t>(it - kLayers.begin());
}

// The layer of a header named "dataecho/..." (relative to include/).
std::string public_layer(const std::vector<std::string>& parts) {
  if (parts.size() == 2) return "spec";  // dataecho/dataecho.h: the engine's entry header
  if (parts[1] == "proto")               // generated messages: the data service's, or tf.Example's
    return parts.size() > 2 && parts[2].rfind("service.", 0) == 0 ? "service" : "formats";
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

// ---- links ----

// The engine's layers, each a static library dataecho_<layer>.
const std::vector<std::string> kEngineLayers = {"core",    "ops",     "io",  "image",
                                                "formats", "service", "spec"};

// The gRPC plugin's folder: a library of its own (MODULE dataecho_grpc), the only place
// gRPC's headers may appear; not part of its layer's library.
const std::string kGrpcPluginDir = "src/service/grpc_plugin";

// A third-party library by the headers that use it (<curl/curl.h>: libcurl).
std::string library_of_header(const std::string& inc) {
  static const std::vector<std::pair<std::string, std::string>> kByPrefix = {
      {"curl/", "libcurl"},
      {"zlib.h", "zlib"},
      {"dlfcn.h", "dl"},  // dlopen: the SentencePiece and gRPC plugins
      {"archive.h", "libarchive"},
      {"archive_entry.h", "libarchive"},
      {"turbojpeg.h", "libturbojpeg"},
      {"jpeglib.h", "libjpeg"},
      {"jerror.h", "libjpeg"},
      {"spng.h", "spng"},
      {"google/protobuf/", "protobuf"},
      {"nlohmann/", "nlohmann_json"}};
  for (const auto& [prefix, lib] : kByPrefix)
    if (inc.rfind(prefix, 0) == 0) return lib;
  return "";
}

// A link item of layer_links.txt: a layer ("dataecho_io": io) or a library.
std::string library_of_link(const std::string& item) {
  if (item.rfind("dataecho_", 0) == 0) return "layer " + item.substr(9);
  if (item.rfind("PkgConfig::DE_", 0) == 0) return item.substr(14);
  if (item == "protobuf::libprotobuf") return "protobuf";
  if (item == "nlohmann_json::nlohmann_json") return "nlohmann_json";
  if (item == "Threads::Threads") return "threads";
  return item;
}

// What the files of `layer` (src/<layer>/ and include/dataecho/<layer>/) include from
// outside it: "layer X" for a header of layer X (public or private), a library name for
// a third-party header; each with the first file and line that does.
std::map<std::string, std::string> includes_of(const fs::path& root, const std::string& layer) {
  std::map<std::string, std::string> used;
  const std::regex quoted(R"(^\s*#\s*include\s*"([^"]+)\")"),
      angled(R"(^\s*#\s*include\s*<([^>]+)>)");
  for (const fs::path& dir : {root / "src" / layer, root / "include" / "dataecho" / layer}) {
    if (!fs::exists(dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      if (rel.rfind(kGrpcPluginDir + "/", 0) == 0) continue;  // a library of its own
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        std::string what;
        if (std::regex_search(line, m, quoted)) {
          const std::string inc = m[1];
          const auto ip = split(inc);
          if (inc.size() > 5 && inc.compare(inc.size() - 5, 5, ".pb.h") == 0 &&
              !used.count("protobuf"))
            used["protobuf"] = rel + ":" + std::to_string(n);  // a generated message
          if (ip.size() >= 2 && ip[0] == "dataecho")
            what = "layer " + public_layer(ip);
          else if (ip.size() >= 2 && rank_of(ip[0]))
            what = "layer " + ip[0];
        } else if (std::regex_search(line, m, angled)) {
          what = library_of_header(m[1]);
        }
        if (!what.empty() && what != "layer " + layer && !used.count(what))
          used[what] = rel + ":" + std::to_string(n);
      }
    }
  }
  return used;
}

// layer_links.txt: "io: dataecho_core PkgConfig::DE_libcurl" per layer (items separated
// by spaces or commas).
std::map<std::string, std::set<std::string>> read_links(const std::string& text) {
  std::map<std::string, std::set<std::string>> links;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto& items = links[line.substr(0, colon)];
    std::string rest = line.substr(colon + 1);
    std::replace(rest.begin(), rest.end(), ',', ' ');
    std::istringstream in_line(rest);
    std::string item;
    while (in_line >> item) items.insert(library_of_link(item));
  }
  return links;
}

// Every difference between what each layer links and what its files include: a link
// nothing includes, an include nothing links, a link up the layer order. Core's
// nlohmann_json and threads reach every layer through core.
std::vector<std::string> link_mismatches(const fs::path& root, const std::string& links_text) {
  std::vector<std::string> found;
  const auto links = read_links(links_text);
  for (const auto& layer : kEngineLayers) {
    auto it = links.find(layer);
    if (it == links.end()) {
      found.push_back(layer + ": no links listed");
      continue;
    }
    const std::set<std::string>& linked = it->second;
    const auto used = includes_of(root, layer);
    for (const auto& item : linked) {
      if (layer == "core" && (item == "nlohmann_json" || item == "threads")) continue;
      if (item.rfind("layer ", 0) == 0 && rank_of(item.substr(6)) > rank_of(layer))
        found.push_back(layer + ": links " + item + ", above it");
      if (!used.count(item))
        found.push_back(layer + ": links " + item + ", which no file of it includes");
    }
    for (const auto& [item, where] : used) {
      if (item == "nlohmann_json" || item == "threads") continue;  // through core
      if (!linked.count(item))
        found.push_back(layer + ": " + where + " includes " + item + ", which it does not link");
    }
  }
  return found;
}

// Includes of another layer's private header ("ops/map_and_batch.h" from spec): such a
// header is part of the layer's implementation; another layer uses a public header.
std::vector<std::string> private_includes(const fs::path& root) {
  std::vector<std::string> found;
  const std::regex include_re(R"(^\s*#\s*include\s*"([^"]+)\")");
  if (!fs::exists(root / "src")) return found;
  for (const auto& entry : fs::recursive_directory_iterator(root / "src")) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    const std::string rel = fs::relative(entry.path(), root).generic_string();
    const std::string layer = split(rel)[1];
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      const auto ip = split(m[1]);
      if (ip.size() >= 2 && rank_of(ip[0]) && ip[0] != layer)
        found.push_back(rel + ":" + std::to_string(n) + ": includes \"" + std::string(m[1]) +
                        "\", private to layer " + ip[0]);
    }
  }
  return found;
}

// Includes of gRPC's headers (<grpcpp/...>, <grpc/...>) outside the gRPC plugin's folder:
// a program that links them maps gRPC at start.
std::vector<std::string> grpc_includes(const fs::path& root) {
  std::vector<std::string> found;
  const std::regex grpc_re(R"(^\s*#\s*include\s*[<"](grpcpp?/[^>"]+)[>"])");
  for (const char* top : {"src", "include", "bench"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      if (rel.rfind(kGrpcPluginDir + "/", 0) == 0) continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (std::regex_search(line, m, grpc_re))
          found.push_back(rel + ":" + std::to_string(n) + ": includes <" + std::string(m[1]) + ">");
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

TEST(Layers, NoLayerIncludesAnotherLayersPrivateHeader) {
  const auto found = private_includes(DATAECHO_SOURCE_DIR);
  EXPECT_TRUE(found.empty()) << "private headers of another layer:\n" << joined(found);
}

TEST(Layers, GrpcHeadersOnlyInTheGrpcPlugin) {
  const auto found = grpc_includes(DATAECHO_SOURCE_DIR);
  EXPECT_TRUE(found.empty()) << "gRPC headers outside " << kGrpcPluginDir << ":\n" << joined(found);
}

TEST(Layers, TheGrpcCheckFindsAnIncludeOutsideThePlugin) {
  const fs::path root = fs::temp_directory_path() / ("dataecho_grpc_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / kGrpcPluginDir);
  fs::create_directories(root / "src/service");
  std::ofstream(root / kGrpcPluginDir / "grpc_plugin.cc") << "#include <grpcpp/grpcpp.h>\n";
  std::ofstream(root / "src/service/transport.cc") << "#include <vector>\n";
  EXPECT_TRUE(grpc_includes(root).empty()) << joined(grpc_includes(root));
  std::ofstream(root / "src/service/transport.cc")
      << "#include <vector>\n#include <grpcpp/channel.h>\n";
  EXPECT_EQ(grpc_includes(root),
            std::vector<std::string>{"src/service/transport.cc:2: includes <grpcpp/channel.h>"});
  fs::remove_all(root);
}

TEST(Layers, EachLayerLinksExactlyWhatItIncludes) {
  std::ifstream in(std::string(DATAECHO_BINARY_DIR) + "/layer_links.txt");
  ASSERT_TRUE(in) << "no layer_links.txt in the build folder (CMakeLists.txt writes it)";
  std::stringstream text;
  text << in.rdbuf();
  const auto found = link_mismatches(DATAECHO_SOURCE_DIR, text.str());
  EXPECT_TRUE(found.empty()) << "links that differ from the includes:\n"
                             << joined(found) << "layer_links.txt:\n"
                             << text.str();
}

TEST(Layers, TheLinkCheckFindsAnExtraAMissingAndAnUpwardLink) {
  const fs::path root =
      fs::temp_directory_path() / ("dataecho_links_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("src/core/a.cc", "#include <nlohmann/json.hpp>\n#include \"core/private.h\"\n");
  write("src/ops/a.cc", "#include \"dataecho/core/tensor.h\"\n");
  write("src/io/a.cc", "#include \"dataecho/io/byte_stream.h\"\n#include <curl/curl.h>\n");
  write("src/image/a.cc", "#include <spng.h>\n#include \"dataecho/core/tensor.h\"\n");
  write("src/formats/a.cc", "#include \"dataecho/image/codec.h\"\n");
  write("src/service/a.cc", "#include \"dataecho/core/error.h\"\n#include <dlfcn.h>\n");
  write("src/service/grpc_plugin/p.cc", "#include <grpcpp/grpcpp.h>\n#include <curl/curl.h>\n");
  write("src/spec/a.cc", "#include \"dataecho/formats/convert.h\"\n");
  std::string links =
      "core: nlohmann_json::nlohmann_json, Threads::Threads\n"
      "ops: dataecho_core\n"
      "io: PkgConfig::DE_libcurl\n"
      "image: dataecho_core, PkgConfig::DE_spng\n"
      "formats: dataecho_image\n"
      "service: dataecho_core, dl\n"
      "spec: dataecho_formats\n";
  EXPECT_TRUE(link_mismatches(root, links).empty()) << joined(link_mismatches(root, links));
  // formats linking io, io not linking curl, ops linking spec (up the order).
  links =
      "core: nlohmann_json::nlohmann_json, Threads::Threads\n"
      "ops: dataecho_core, dataecho_spec\n"
      "io: dataecho_core\n"
      "image: dataecho_core, PkgConfig::DE_spng\n"
      "formats: dataecho_image, dataecho_io\n"
      "service: dataecho_core, dl\n"
      "spec: dataecho_formats\n";
  auto found = link_mismatches(root, links);
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), 5u) << joined(found);
  EXPECT_EQ(found[0], "formats: links layer io, which no file of it includes");
  EXPECT_EQ(found[1], "io: links layer core, which no file of it includes");
  EXPECT_EQ(found[2], "io: src/io/a.cc:2 includes libcurl, which it does not link");
  EXPECT_EQ(found[3], "ops: links layer spec, above it");
  EXPECT_EQ(found[4], "ops: links layer spec, which no file of it includes");
  // A private header of another layer.
  write("src/spec/b.cc", "#include \"ops/map_and_batch.h\"\n");
  EXPECT_EQ(private_includes(root),
            std::vector<std::string>{
                "src/spec/b.cc:1: includes \"ops/map_and_batch.h\", private to layer ops"});
  fs::remove_all(root);
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
  write("src/formats/convert.cc", "#include \"dataecho/image/codec.h\"\n");  // image < formats
  EXPECT_TRUE(upward_includes(root).empty()) << joined(upward_includes(root));
  // image reaching up to spec, core to ops and image to formats: each named, with the line.
  write("src/image/image_functions.cc",
        "#include \"dataecho/image/codec.h\"\n#include \"dataecho/spec/registry.h\"\n");
  write("include/dataecho/core/pipeline.h", "  #  include \"ops/batch_builder.h\"\n");
  write("include/dataecho/image/codec.h", "#include \"dataecho/formats/tfrecord.h\"\n");
  auto found = upward_includes(root);
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), 3u) << joined(found);
  EXPECT_EQ(found[0],
            "include/dataecho/core/pipeline.h:1: includes \"ops/batch_builder.h\" (from layer core "
            "up to layer ops)");
  EXPECT_EQ(found[1],
            "include/dataecho/image/codec.h:1: includes \"dataecho/formats/tfrecord.h\" (from "
            "layer image up to layer formats)");
  EXPECT_EQ(found[2],
            "src/image/image_functions.cc:2: includes \"dataecho/spec/registry.h\" (from layer "
            "image up to layer spec)");
  fs::remove_all(root);
}

}  // namespace
}  // namespace dataecho::testing
