// The "cache" stage of the spec (ops/cache.h): its options, the refusal of a cache after
// a shuffle, and the key of a disk cache, which fingerprints everything upstream.
#include <sys/stat.h>

#include "dataecho/io/byte_stream.h"
#include "dataecho/ops/cache.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

// What the stage at ctx.node_index has upstream: the definition's seed, order and
// source and the stages before it.
nlohmann::json upstream_of(const BuildContext& ctx) {
  nlohmann::json u = nlohmann::json::object();
  const nlohmann::json& c = *ctx.canonical;
  for (const char* key : {"seed", "deterministic", "source"})
    if (c.contains(key)) u[key] = c[key];
  if (!ctx.source_fingerprint.empty()) u["source"] = ctx.source_fingerprint;
  u["stages"] = nlohmann::json::array();
  if (c.contains("stages"))
    for (int64_t i = 0; i + 1 < ctx.node_index; ++i) u["stages"].push_back(c["stages"][i]);
  return u;
}

// Size and modification time of each local file the source names ("uri", "images",
// "labels"), so that a file rewritten in place changes the key. URLs and patterns that
// match nothing are left to the source to report.
nlohmann::json source_files(const nlohmann::json& source, const std::string& base_dir) {
  std::vector<std::string> patterns;
  for (const char* key : {"uri", "images", "labels"}) {
    if (!source.is_object() || !source.contains(key)) continue;
    const nlohmann::json& v = source[key];
    // Remote entries (and remote manifests) are not listed or read here: they are no
    // local files, and listing a bucket would need the source's stream options.
    auto add = [&](const std::string& p) {
      if (!is_remote_uri(p) && !(p.size() > 1 && p[0] == '@' && is_remote_uri(p.substr(1))))
        patterns.push_back(p);
    };
    if (v.is_string()) add(v.get<std::string>());
    if (v.is_array())
      for (const auto& x : v)
        if (x.is_string()) add(x.get<std::string>());
  }
  nlohmann::json files = nlohmann::json::array();
  std::vector<std::string> uris;
  try {
    uris = expand_uris(patterns, base_dir);
  } catch (const Error&) {
    return files;
  }
  for (const std::string& uri : uris) {
    struct stat st {};
    if (is_remote_uri(uri) || ::stat(uri.c_str(), &st) != 0) continue;
    files.push_back({uri, static_cast<int64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  return files;
}

bool has_python_function(const nlohmann::json& stages) {
  for (const auto& s : stages)
    if (s.value("fn", "") == "python") return true;
  return false;
}

DatasetPtr build_cache(SpecObject& s, DatasetPtr in, BuildContext& ctx) {
  CacheOptions o;
  o.path = s.has("path") ? resolve_spec_path(ctx.base_dir, s.get_string("path")) : "";
  o.max_bytes = s.get_int("max_bytes");
  o.prefix = s.get_string("on_full") == "prefix";
  const bool allow_shuffled = s.get_bool("allow_shuffled");
  const std::string key = s.has("key") ? s.get_string("key") : "";
  nlohmann::json upstream = upstream_of(ctx);
  for (size_t i = 0; i < upstream["stages"].size() && !allow_shuffled; ++i) {
    if (upstream["stages"][i].value("op", "") == "shuffle")
      throw_spec_error(s.path(), "a cache after the shuffle at $.stages[" + std::to_string(i) +
                                     "] replays the first pass's order every epoch: put the "
                                     "shuffle after the cache (or set \"allow_shuffled\": true)");
  }
  if (!o.path.empty()) {
    if (!key.empty()) {
      o.key = key;
    } else if (has_python_function(upstream["stages"]) || !ctx.source_fingerprint.empty()) {
      throw_spec_error(s.field_path("key"),
                       "a stage upstream (a Python function, or a source made in code) has no "
                       "stable fingerprint: give the disk cache a \"key\" that names what it "
                       "holds");
    } else {
      upstream["files"] = source_files(upstream["source"], ctx.base_dir);
      o.key = spec_fingerprint(upstream.dump()).substr(8);  // the hex digits
    }
  }
  return make_cache(std::move(in), std::move(o));
}

}  // namespace

void register_cache_builders(Registry& r) {
  r.add_stage({"cache",
               "Caches the first pass, in memory or on local disk; later passes read the cache "
               "(docs/echo.md, \"Cache or echo\"). On disk, a file written during the first "
               "pass is renamed into place only when the pass completed, keyed by a "
               "fingerprint of everything upstream (the spec up to here, the seed, the local "
               "source files' sizes and times), so that a changed spec or file never reads a "
               "stale cache; `key` names it instead (required after a Python function). A "
               "cache after a shuffle would replay one order every epoch: it is refused unless "
               "`allow_shuffled`; shuffle after the cache.",
               {{.name = "path",
                 .type = OptionType::kString,
                 .fallback = "",
                 .default_text = "in memory",
                 .written = Written::kUnlessDefault,
                 .doc = "a folder on local disk (relative to the spec's)"},
                {.name = "key",
                 .type = OptionType::kString,
                 .default_text = "a fingerprint of everything upstream and of the source's files",
                 .doc = "disk: names what the cache holds"},
                {.name = "max_bytes",
                 .fallback = 0,
                 .min = 0,
                 .max = kMaxBytes,
                 .doc = "memory: bytes of tensors held (0: a quarter of physical memory)"},
                {.name = "on_full",
                 .type = OptionType::kString,
                 .fallback = "fail",
                 .choices = {"fail", "prefix"},
                 .written = Written::kUnlessDefault,
                 .doc = "memory: past max_bytes, fail the pass or keep the prefix that fits"},
                {.name = "allow_shuffled",
                 .type = OptionType::kBool,
                 .fallback = false,
                 .doc = "allow a shuffle upstream (its first order is replayed)"}}},
              build_cache);
}

}  // namespace dataecho
