// Spec builders for the file sources: idx, tfrecord, tar, files (see docs/formats.md) and
// text (docs/text.md).
#include <cstdlib>
#include <iostream>

#include "dataecho/formats/files.h"
#include "dataecho/formats/idx.h"
#include "dataecho/formats/tar.h"
#include "dataecho/formats/text.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

OnError read_on_error(SpecObject& s) {
  return parse_on_error(s.get_string("on_error", "fail", {"fail", "skip", "echo"}));
}

StreamOptions read_stream_options(SpecObject& s, const std::string& base_dir) {
  StreamOptions o;
  o.buffer_bytes = static_cast<size_t>(
      s.get_int("buffer_bytes", static_cast<int64_t>(o.buffer_bytes), 1, int64_t{1} << 30));
  // "cache_dir" (a folder; relative to the spec's), "cache_max_bytes" and
  // "cache_revalidate_s": http(s) shards kept on local disk (io/shard_cache.h).
  if (s.has("cache_dir")) o.cache_dir = resolve_spec_path(base_dir, s.get_string("cache_dir"));
  o.cache_max_bytes = s.get_int("cache_max_bytes", 0, 0);
  o.cache_revalidate_s = s.get_number("cache_revalidate_s", o.cache_revalidate_s, 0, 1e9);
  // "http": {"connect_timeout_s", "low_speed_time_s", "max_retries", "backoff_initial_s",
  // "backoff_max_s"} (docs/http.md); used by http(s) shards, harmless for local ones.
  if (s.has("http")) {
    SpecObject h = s.get_object("http");
    o.connect_timeout_s = h.get_number("connect_timeout_s", o.connect_timeout_s, 0.001, 3600);
    o.low_speed_time_s = h.get_number("low_speed_time_s", o.low_speed_time_s, 0, 86400);
    o.max_retries = static_cast<int>(h.get_int("max_retries", o.max_retries, 0, 1000));
    o.backoff_initial_s = h.get_number("backoff_initial_s", o.backoff_initial_s, 0, 3600);
    o.backoff_max_s =
        h.get_number("backoff_max_s", std::max(o.backoff_max_s, o.backoff_initial_s), 0, 3600);
    if (o.backoff_max_s < o.backoff_initial_s) {
      throw_spec_error(h.field_path("backoff_max_s"),
                       "expected a number >= backoff_initial_s (" +
                           nlohmann::json(o.backoff_initial_s).dump() + "), got " +
                           nlohmann::json(o.backoff_max_s).dump());
    }
    // TLS: "ca_file", "ca_path" (relative to the spec's folder), "insecure"; "headers":
    // {"Authorization": "Bearer ..."} or, to keep secrets out of spec files,
    // {"Authorization": {"env": "DATAECHO_TOKEN"}} (the variable's value, read at build).
    if (h.has("ca_file")) o.ca_file = resolve_spec_path(base_dir, h.get_string("ca_file"));
    if (h.has("ca_path")) o.ca_path = resolve_spec_path(base_dir, h.get_string("ca_path"));
    o.insecure = h.get_bool("insecure", false);
    o.plain_http_credentials = h.get_bool("plain_http_credentials", false);
    if (o.insecure) {
      std::cerr << "dataecho: warning: " << h.field_path("insecure")
                << " is true: https certificates and host names are NOT verified for this "
                   "source\n";
    }
    if (const nlohmann::json* hs = h.raw("headers")) {
      const std::string path = h.field_path("headers");
      if (!hs->is_object())
        throw_spec_error(path, "expected an object {header name: value or {\"env\": VAR}}");
      for (const auto& [name, v] : hs->items()) {
        std::string value;
        if (v.is_string()) {
          value = v.get<std::string>();
        } else if (v.is_object() && v.size() == 1 && v.contains("env") && v["env"].is_string()) {
          const std::string var = v["env"].get<std::string>();
          const char* env = std::getenv(var.c_str());
          if (!env)
            throw_spec_error(path + "." + name + ".env",
                             "the environment variable " + var + " is not set");
          value = env;
        } else {
          throw_spec_error(
              path + "." + name,
              "expected a string or {\"env\": \"VARIABLE\"}, got a " + std::string(v.type_name()));
        }
        if (name.empty() || name.find_first_of(":\r\n") != std::string::npos ||
            value.find_first_of("\r\n") != std::string::npos)
          throw_spec_error(path + "." + name,
                           "a header name or value may not hold ':' or a newline");
        o.headers.push_back(name + ": " + value);
      }
    }
    h.finish();
  }
  return o;
}

std::vector<std::string> read_uris(SpecObject& s, const BuildContext& ctx) {
  std::vector<std::string> patterns = s.get_strings("uri");
  if (patterns.empty())
    throw_spec_error(s.field_path("uri"), "expected at least one path, glob or URL");
  try {
    return expand_uris(patterns, ctx.base_dir);
  } catch (const Error& e) {
    throw_spec_error(s.field_path("uri"), e.what());
  }
}

// "features": {"image": {"key": "image/encoded"}, "label": "image/class/label"}
std::vector<TfFeature> read_features(SpecObject& s) {
  std::vector<TfFeature> out;
  const nlohmann::json* f = s.raw("features");
  if (!f) return out;
  std::string path = s.field_path("features");
  if (!f->is_object() || f->empty()) {
    throw_spec_error(
        path, std::string("expected an object {field name: {\"key\": tf.Example key}}, got ") +
                  f->dump());
  }
  for (const auto& [name, v] : f->items()) {
    std::string fpath = path + "." + name;
    if (v.is_string()) {
      out.push_back({name, v.get<std::string>()});
      continue;
    }
    SpecObject o(v, fpath);
    out.push_back({name, o.get_string("key")});
    o.finish();
  }
  return out;
}

// "fields": ["title", "body"] or {"text": "body"}: JSON Lines keys as fields.
std::vector<std::pair<std::string, std::string>> read_key_fields(SpecObject& s) {
  std::vector<std::pair<std::string, std::string>> out;
  const nlohmann::json* f = s.raw("fields");
  if (!f) return out;
  const std::string path = s.field_path("fields");
  if (f->is_array()) {
    for (const auto& x : *f) {
      if (!x.is_string()) throw_spec_error(path, "expected a list of keys, got " + f->dump());
      out.emplace_back(x.get<std::string>(), x.get<std::string>());
    }
  } else if (f->is_object()) {
    for (const auto& [name, x] : f->items()) {
      if (!x.is_string()) throw_spec_error(path + "." + name, "expected a key, got " + x.dump());
      out.emplace_back(name, x.get<std::string>());
    }
  } else {
    throw_spec_error(path, "expected a list of keys or an object {field: key}, got " + f->dump());
  }
  if (out.empty()) throw_spec_error(path, "expected at least one key");
  return out;
}

DatasetPtr build_text_source(SpecObject& s, BuildContext& ctx) {
  TextOptions o;
  o.uris = read_uris(s, ctx);
  const bool jsonl = s.get_string("format", "lines", {"lines", "jsonl"}) == "jsonl";
  o.format = jsonl ? TextOptions::Format::kJsonLines : TextOptions::Format::kLines;
  o.separator = s.get_string("separator", "\n");
  if (o.separator.empty()) throw_spec_error(s.field_path("separator"), "may not be empty");
  o.max_bytes = s.get_int("max_bytes", o.max_bytes, 1, int64_t{1} << 30);
  o.utf8 = s.get_bool("utf8", true);
  o.keep_empty = s.get_bool("keep_empty", false);
  if (s.has("fields") && !jsonl)
    throw_spec_error(s.field_path("fields"), "\"fields\" needs \"format\": \"jsonl\"");
  o.fields = read_key_fields(s);
  o.on_error = read_on_error(s);
  o.stream = read_stream_options(s, ctx.base_dir);
  return make_text_source(o);
}

// {"kind": "files", "root" | "uri" | "list": ..., ...} (formats/files.h)
DatasetPtr build_files(SpecObject& s, BuildContext& ctx) {
  FilesOptions o;
  o.base_dir = ctx.base_dir;
  if (s.has("root")) o.root = s.get_string("root");
  if (s.has("uri")) o.uris = s.get_strings("uri");
  if (s.has("list")) o.list = s.get_string("list");
  if (s.has("base")) o.base = s.get_string("base");
  if (s.has("delimiter")) {
    std::string d = s.get_string("delimiter");
    if (d.size() != 1 || d[0] == '"' || d[0] == '\n')
      throw_spec_error(s.field_path("delimiter"),
                       "expected one character such as \",\" or \"\\t\"");
    o.delimiter = d[0];
  }
  if (s.has("header")) o.header = s.get_bool("header");
  if (const nlohmann::json* ex = s.raw("extensions"))
    o.extensions =
        ex->is_array() && ex->empty() ? std::vector<std::string>{} : s.get_strings("extensions");
  o.allow_empty = s.get_bool("allow_empty", false);
  o.reads_in_flight = s.get_int("reads_in_flight", o.reads_in_flight, 1, 1024);
  o.path_field = s.get_bool("path", false);
  o.on_error = read_on_error(s);
  o.stream = read_stream_options(s, ctx.base_dir);
  if (o.root.empty() + o.uris.empty() + o.list.empty() != 2)
    throw_spec_error(s.path(),
                     "give exactly one of \"root\" (an ImageFolder tree), \"uri\" (paths, globs, "
                     "brace patterns) and \"list\" (a CSV or TSV file)");
  try {
    return make_files_source(o);
  } catch (const Error& e) {
    if (e.stage() == "spec") throw;
    throw_spec_error(s.path(), e.what());
  }
}

}  // namespace

void register_format_builders(Registry& r) {
  r.sources["text"] = build_text_source;
  r.sources["files"] = build_files;
  r.sources["idx"] = [](SpecObject& s, BuildContext& ctx) {
    IdxOptions o;
    o.images = resolve_spec_path(ctx.base_dir, s.get_string("images"));
    o.labels = s.has("labels") ? resolve_spec_path(ctx.base_dir, s.get_string("labels")) : "";
    o.limit = s.get_int("limit", -1, -1);
    o.on_error = read_on_error(s);
    o.stream = read_stream_options(s, ctx.base_dir);
    return make_idx_source(o);
  };

  r.sources["tfrecord"] = [](SpecObject& s, BuildContext& ctx) {
    TfRecordOptions o;
    o.uris = read_uris(s, ctx);
    o.features = read_features(s);
    o.raw = s.get_bool("raw", false);
    if (o.raw && !o.features.empty())
      throw_spec_error(s.field_path("raw"),
                       "\"raw\" gives the record bytes as field \"record\"; drop \"features\"");
    o.on_error = read_on_error(s);
    o.verify_crc = s.get_bool("verify_crc", true);
    o.stream = read_stream_options(s, ctx.base_dir);
    return make_tfrecord_source(o);
  };

  r.sources["tar"] = [](SpecObject& s, BuildContext& ctx) {
    TarOptions o;
    o.uris = read_uris(s, ctx);
    if (const nlohmann::json* f = s.raw("fields")) {
      std::string path = s.field_path("fields");
      if (f->is_array()) {
        for (const auto& x : *f) {
          if (!x.is_string())
            throw_spec_error(
                path, "expected a list of extensions like [\"jpg\", \"cls\"], got " + f->dump());
          o.fields.emplace_back(x.get<std::string>(), x.get<std::string>());
        }
      } else if (f->is_object()) {
        for (const auto& [name, x] : f->items()) {
          if (!x.is_string())
            throw_spec_error(path + "." + name,
                             "expected an extension like \"jpg\", got " + x.dump());
          o.fields.emplace_back(name, x.get<std::string>());
        }
      } else {
        throw_spec_error(
            path,
            "expected a list of extensions or an object {field: extension}, got " + f->dump());
      }
    }
    o.on_error = read_on_error(s);
    o.stream = read_stream_options(s, ctx.base_dir);
    return make_tar_source(o);
  };
}

}  // namespace dataecho
