// Spec builders for the file sources: idx, tfrecord, tar, files (see docs/formats.md) and
// text (docs/text.md).
#include <cstdlib>
#include <iostream>

#include "dataecho/core/redact.h"
#include "dataecho/formats/files.h"
#include "dataecho/formats/idx.h"
#include "dataecho/formats/tar.h"
#include "dataecho/formats/text.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

OnError read_on_error(SpecObject& s) { return parse_on_error(s.get_string("on_error")); }

// The "http" object's options (docs/http.md).
std::vector<OptionDecl> http_options() {
  const StreamOptions d;
  return {{.name = "connect_timeout_s",
           .type = OptionType::kNumber,
           .fallback = d.connect_timeout_s,
           .min = 0.001,
           .max = 3600,
           .doc = "seconds to connect"},
          {.name = "low_speed_time_s",
           .type = OptionType::kNumber,
           .fallback = d.low_speed_time_s,
           .min = 0,
           .max = 86400,
           .doc = "a transfer slower than 1 byte/s for this long is retried"},
          {.name = "max_retries",
           .fallback = d.max_retries,
           .min = 0,
           .max = 1000,
           .doc = "retries of a failed transfer, resuming where it stopped"},
          {.name = "backoff_initial_s",
           .type = OptionType::kNumber,
           .fallback = d.backoff_initial_s,
           .min = 0,
           .max = 3600,
           .doc = "the first wait before a retry, doubled each time"},
          {.name = "backoff_max_s",
           .type = OptionType::kNumber,
           .min = 0,
           .max = 3600,
           .default_text = "max(5, backoff_initial_s)",
           .doc = "the longest wait"},
          {.name = "ca_file",
           .type = OptionType::kString,
           .default_text = "the system's",
           .doc = "certificates to verify https servers with"},
          {.name = "ca_path",
           .type = OptionType::kString,
           .default_text = "the system's",
           .doc = "a folder of certificates"},
          {.name = "insecure",
           .type = OptionType::kBool,
           .fallback = d.insecure,
           .doc = "do not verify certificates and host names (warned)"},
          {.name = "plain_http_credentials",
           .type = OptionType::kBool,
           .fallback = d.plain_http_credentials,
           .doc = "allow credential headers over plain http"},
          {.name = "headers",
           .type = OptionType::kJson,
           .default_text = "none",
           .shape = "an object {header name: value or {\"env\": VARIABLE}}",
           .doc = "request headers; {\"env\": ...} reads a value from the environment"}};
}

// The "s3" object's options (docs/http.md). Never a secret: credentials come from the
// environment or the AWS files only.
std::vector<OptionDecl> s3_options() {
  return {{.name = "profile",
           .type = OptionType::kString,
           .default_text = "AWS_PROFILE, else default",
           .doc = "the profile of ~/.aws/credentials and ~/.aws/config (the AWS_ACCESS_KEY_ID "
                  "variables are then not used)"},
          {.name = "region",
           .type = OptionType::kString,
           .default_text = "AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1",
           .doc = "the bucket's region, which every request is signed for"},
          {.name = "endpoint",
           .type = OptionType::kString,
           .default_text = "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's, else AWS's",
           .doc = "the store, http(s)://host[:port] (an S3-compatible store, a local server)"},
          {.name = "addressing",
           .type = OptionType::kString,
           .fallback = "auto",
           .choices = {"auto", "path", "virtual"},
           .doc = "the bucket in the path or in the host name; auto: the profile's "
                  "s3.addressing_style, else virtual on AWS and path elsewhere"},
          {.name = "anonymous",
           .type = OptionType::kBool,
           .fallback = false,
           .doc = "unsigned requests, for public buckets (no credentials looked for)"},
          {.name = "max_keys",
           .fallback = int64_t{S3Options().max_keys},
           .min = 1,
           .max = 1000,
           .doc = "the keys a listing page asks for"},
          {.name = "list_parallelism",
           .fallback = int64_t{S3Options().list_parallelism},
           .min = 1,
           .max = 64,
           .doc = "the prefixes of a brace pattern listed at once"}};
}

// What every file source takes beside its own options: bad records and the byte stream.
std::vector<OptionDecl> stream_options() {
  const StreamOptions d;
  return {{.name = "on_error",
           .type = OptionType::kString,
           .fallback = "fail",
           .choices = {"fail", "skip", "echo"},
           .doc = "a bad record: stop with an error naming it, skip it, or repeat the last good "
                  "one (docs/formats.md)"},
          {.name = "buffer_bytes",
           .fallback = static_cast<int64_t>(d.buffer_bytes),
           .min = 1,
           .max = int64_t{1} << 30,
           .doc = "a stream's read-ahead buffer"},
          {.name = "cache_dir",
           .type = OptionType::kString,
           .default_text = "none",
           .doc = "http(s) and s3:// files kept in this folder on local disk (relative to "
                  "the spec's)"},
          {.name = "cache_max_bytes",
           .fallback = d.cache_max_bytes,
           .min = 0,
           .max = kMaxBytes,
           .doc = "the cache folder's bound, least recently used first out (0: none)"},
          {.name = "cache_revalidate_s",
           .type = OptionType::kNumber,
           .fallback = d.cache_revalidate_s,
           .min = 0,
           .max = 1e9,
           .doc = "seconds a cached file is used before the server is asked again"},
          {.name = "http",
           .type = OptionType::kObject,
           .fields = http_options(),
           .doc = "http(s) transfers (docs/http.md); harmless for local files"},
          {.name = "s3",
           .type = OptionType::kObject,
           .fields = s3_options(),
           .doc = "s3:// objects: store, region, profile (docs/http.md); secrets only from the "
                  "environment or ~/.aws"}};
}

// A source's own options followed by stream_options().
OpSchema source_schema(std::string name, std::string doc, std::vector<OptionDecl> options) {
  for (OptionDecl& d : stream_options()) options.push_back(std::move(d));
  return {std::move(name), std::move(doc), std::move(options)};
}

// A file source's "uri" (a function, not a static: the registry may be filled while
// other statics are still being made).
OptionDecl uri_option() {
  return {.name = "uri",
          .type = OptionType::kStrings,
          .required = true,
          .doc =
              "paths, globs, brace ranges ({00000..00007}), http(s) or s3:// URLs or "
              "@manifest files"};
}

// "headers": {"Authorization": "Bearer ..."} or, to keep secrets out of spec files,
// {"Authorization": {"env": "DATAECHO_TOKEN"}} (the variable's value, read at build and
// redacted from every text: redact.h).
void read_headers(SpecObject& h, StreamOptions& o) {
  const nlohmann::json* hs = h.raw("headers");
  if (!hs) return;
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
      register_secret(value);
    } else {
      throw_spec_error(path + "." + name, "expected a string or {\"env\": \"VARIABLE\"}, got a " +
                                              std::string(v.type_name()));
    }
    if (name.empty() || name.find_first_of(":\r\n") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos)
      throw_spec_error(path + "." + name, "a header name or value may not hold ':' or a newline");
    o.headers.push_back(name + ": " + value);
  }
}

// "http": {"connect_timeout_s", "low_speed_time_s", "max_retries", "backoff_initial_s",
// "backoff_max_s"} (docs/http.md); used by http(s) and s3 shards, harmless for local ones.
// TLS: "ca_file", "ca_path" (relative to the spec's folder), "insecure"; "headers".
void read_http_options(SpecObject& h, const std::string& base_dir, StreamOptions& o) {
  o.connect_timeout_s = h.get_number("connect_timeout_s");
  o.low_speed_time_s = h.get_number("low_speed_time_s");
  o.max_retries = static_cast<int>(h.get_int("max_retries"));
  o.backoff_initial_s = h.get_number("backoff_initial_s");
  o.backoff_max_s = h.get_number("backoff_max_s", std::max(o.backoff_max_s, o.backoff_initial_s));
  if (o.backoff_max_s < o.backoff_initial_s) {
    throw_spec_error(h.field_path("backoff_max_s"), "expected a number >= backoff_initial_s (" +
                                                        nlohmann::json(o.backoff_initial_s).dump() +
                                                        "), got " +
                                                        nlohmann::json(o.backoff_max_s).dump());
  }
  if (h.has("ca_file")) o.ca_file = resolve_spec_path(base_dir, h.get_string("ca_file"));
  if (h.has("ca_path")) o.ca_path = resolve_spec_path(base_dir, h.get_string("ca_path"));
  o.insecure = h.get_bool("insecure");
  o.plain_http_credentials = h.get_bool("plain_http_credentials");
  if (o.insecure) {
    std::cerr << "dataecho: warning: " << h.field_path("insecure")
              << " is true: https certificates and host names are NOT verified for this "
                 "source\n";
  }
  read_headers(h, o);
  h.finish();
}

// "s3": {"profile", "region", "endpoint", "addressing", "anonymous", "max_keys",
// "list_parallelism"}. A secret written there is refused: it would sit in a file that is
// copied, logged and committed.
void read_s3_options(SpecObject& s, S3Options& o) {
  const nlohmann::json* j = s.raw("s3");
  if (!j) return;
  for (const char* secret : {"access_key_id", "secret_access_key", "session_token"})
    if (j->is_object() && j->contains(secret))
      throw_spec_error(s.field_path("s3") + "." + secret,
                       "a secret may not be written in a spec: set AWS_ACCESS_KEY_ID, "
                       "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) or use a profile of "
                       "~/.aws/credentials");
  SpecObject s3 = s.get_object("s3");
  if (s3.has("profile")) o.profile = s3.get_string("profile");
  if (s3.has("region")) o.region = s3.get_string("region");
  if (s3.has("endpoint")) o.endpoint = s3.get_string("endpoint");
  o.addressing = s3.get_string("addressing");
  o.anonymous = s3.get_bool("anonymous");
  o.max_keys = static_cast<int>(s3.get_int("max_keys"));
  o.list_parallelism = static_cast<int>(s3.get_int("list_parallelism"));
  s3.finish();
}

StreamOptions read_stream_options(SpecObject& s, const std::string& base_dir) {
  StreamOptions o;
  o.buffer_bytes = static_cast<size_t>(s.get_int("buffer_bytes"));
  // "cache_dir" (a folder; relative to the spec's), "cache_max_bytes" and
  // "cache_revalidate_s": http(s) shards kept on local disk (io/shard_cache.h).
  if (s.has("cache_dir")) o.cache_dir = resolve_spec_path(base_dir, s.get_string("cache_dir"));
  o.cache_max_bytes = s.get_int("cache_max_bytes");
  o.cache_revalidate_s = s.get_number("cache_revalidate_s");
  if (s.has("http")) {
    SpecObject h = s.get_object("http");
    read_http_options(h, base_dir, o);
  }
  read_s3_options(s, o.s3);
  return o;
}

// The "uri" list expanded; s3:// globs and manifests are listed and read with `stream`.
std::vector<std::string> read_uris(SpecObject& s, const BuildContext& ctx,
                                   const StreamOptions& stream) {
  std::vector<std::string> patterns = s.get_strings("uri");
  if (patterns.empty())
    throw_spec_error(s.field_path("uri"), "expected at least one path, glob or URL");
  try {
    return expand_uris(patterns, ctx.base_dir, stream);
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
  o.stream = read_stream_options(s, ctx.base_dir);
  o.uris = read_uris(s, ctx, o.stream);
  const bool jsonl = s.get_string("format") == "jsonl";
  o.format = jsonl ? TextOptions::Format::kJsonLines : TextOptions::Format::kLines;
  o.separator = s.get_string("separator");
  if (o.separator.empty()) throw_spec_error(s.field_path("separator"), "may not be empty");
  o.max_bytes = s.get_int("max_bytes");
  o.utf8 = s.get_bool("utf8");
  o.keep_empty = s.get_bool("keep_empty");
  if (s.has("fields") && !jsonl)
    throw_spec_error(s.field_path("fields"), "\"fields\" needs \"format\": \"jsonl\"");
  o.fields = read_key_fields(s);
  o.on_error = read_on_error(s);
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
  o.allow_empty = s.get_bool("allow_empty");
  o.reads_in_flight = s.get_int("reads_in_flight");
  o.path_field = s.get_bool("path");
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

// text.
void register_text_source(Registry& r) {
  const TextOptions text;
  r.add_source(
      source_schema(
          "text",
          "Text files (plain, gzip or dictzip) or JSON Lines: a line, or a document split by "
          "`separator`, as field \"text\" (uint8 bytes); JSON Lines give a field per key "
          "(docs/text.md).",
          {uri_option(),
           {.name = "format",
            .type = OptionType::kString,
            .fallback = "lines",
            .choices = {"lines", "jsonl"},
            .doc = "text records, or a JSON object per line"},
           {.name = "separator",
            .type = OptionType::kString,
            .fallback = text.separator,
            .doc = "what ends a record (not empty)"},
           {.name = "max_bytes",
            .fallback = text.max_bytes,
            .min = 1,
            .max = int64_t{1} << 30,
            .doc = "a longer record is a bad record"},
           {.name = "utf8",
            .type = OptionType::kBool,
            .fallback = text.utf8,
            .doc = "invalid UTF-8 is a bad record"},
           {.name = "keep_empty",
            .type = OptionType::kBool,
            .fallback = text.keep_empty,
            .doc = "keep empty records"},
           {.name = "fields",
            .type = OptionType::kJson,
            .default_text = "every key",
            .shape = "a list of keys, or an object {field: key}",
            .doc = "jsonl: the keys to read, each required"}}),
      build_text_source);
  const FilesOptions files;
}

// files.
void register_files_source(Registry& r) {
  const FilesOptions files;
  r.add_source(
      source_schema(
          "files",
          "Files read as they are, one element each (\"image\": the bytes, \"label\"): an "
          "ImageFolder tree, a pattern, or a CSV or TSV list (docs/formats.md).",
          {{.name = "root",
            .type = OptionType::kString,
            .doc = "an ImageFolder tree: a folder per class (one of root, uri, list)"},
           {.name = "uri",
            .type = OptionType::kStrings,
            .doc = "paths, globs, brace patterns or URLs (one of root, uri, list)"},
           {.name = "list",
            .type = OptionType::kString,
            .doc = "a CSV or TSV file: path, label, further columns (one of root, uri, list)"},
           {.name = "base",
            .type = OptionType::kString,
            .default_text = "the list's folder",
            .doc = "list: what relative paths are relative to"},
           {.name = "delimiter",
            .type = OptionType::kString,
            .default_text = "tab for .tsv and .tab, else \",\"",
            .doc = "list: the column separator, one character"},
           {.name = "header",
            .type = OptionType::kBool,
            .default_text = "when the first row's second cell is not an integer",
            .doc = "list: the first row names the columns"},
           {.name = "extensions",
            .type = OptionType::kStrings,
            .default_text = "torchvision's image extensions",
            .doc = "root: the files to read ([]: every file)"},
           {.name = "allow_empty",
            .type = OptionType::kBool,
            .fallback = files.allow_empty,
            .doc = "root: allow a class folder without files"},
           {.name = "reads_in_flight",
            .fallback = files.reads_in_flight,
            .min = 1,
            .max = 1024,
            .doc = "files read at once"},
           {.name = "path",
            .type = OptionType::kBool,
            .fallback = files.path_field,
            .doc = "add each file's path as field \"path\""}}),
      build_files);
  const IdxOptions idx;
}

// idx and tfrecord.
void register_record_sources(Registry& r) {
  const FilesOptions files;
  const IdxOptions idx;
  r.add_source(
      source_schema("idx",
                    "MNIST's IDX files (optionally gzipped): fields \"image\" (uint8 [h, w]) "
                    "and \"label\" (int64).",
                    {{.name = "images",
                      .type = OptionType::kString,
                      .required = true,
                      .doc = "the images file (path or URL)"},
                     {.name = "labels",
                      .type = OptionType::kString,
                      .default_text = "none",
                      .doc = "the labels file"},
                     {.name = "limit",
                      .fallback = idx.limit,
                      .min = -1,
                      .doc = "only the first examples (-1: all)"}}),
      [](SpecObject& s, BuildContext& ctx) {
        IdxOptions o;
        o.images = resolve_spec_path(ctx.base_dir, s.get_string("images"));
        o.labels = s.has("labels") ? resolve_spec_path(ctx.base_dir, s.get_string("labels")) : "";
        o.limit = s.get_int("limit");
        o.on_error = read_on_error(s);
        o.stream = read_stream_options(s, ctx.base_dir);
        return make_idx_source(o);
      });

  const TfRecordOptions tf;
  r.add_source(
      source_schema(
          "tfrecord", "TFRecord files of tf.train.Example records (docs/formats.md).",
          {uri_option(),
           {.name = "features",
            .type = OptionType::kJson,
            .default_text = "every feature (image/encoded as \"image\", image/class/label as "
                            "\"label\")",
            .shape = "an object {field: tf.Example key or {\"key\": key}}",
            .doc = "the features to read, by field name"},
           {.name = "raw",
            .type = OptionType::kBool,
            .fallback = tf.raw,
            .doc = "each record's bytes as field \"record\", not parsed"},
           {.name = "verify_crc",
            .type = OptionType::kBool,
            .fallback = tf.verify_crc,
            .doc = "check each record's CRCs"}}),
      [](SpecObject& s, BuildContext& ctx) {
        TfRecordOptions o;
        o.stream = read_stream_options(s, ctx.base_dir);
        o.uris = read_uris(s, ctx, o.stream);
        o.features = read_features(s);
        o.raw = s.get_bool("raw");
        if (o.raw && !o.features.empty())
          throw_spec_error(s.field_path("raw"),
                           "\"raw\" gives the record bytes as field \"record\"; drop \"features\"");
        o.on_error = read_on_error(s);
        o.verify_crc = s.get_bool("verify_crc");
        return make_tfrecord_source(o);
      });
}

// tar.
void register_tar_source(Registry& r) {
  const FilesOptions files;
  r.add_source(
      source_schema("tar",
                    "Tar shards in the WebDataset layout: files sharing a key make one sample "
                    "(docs/formats.md).",
                    {uri_option(),
                     {.name = "fields",
                      .type = OptionType::kJson,
                      .default_text = "every extension, each named by it",
                      .shape = "a list of extensions, or an object {field: extension}",
                      .doc = "the files of a sample to keep, each required"}}),
      [](SpecObject& s, BuildContext& ctx) {
        TarOptions o;
        o.stream = read_stream_options(s, ctx.base_dir);
        o.uris = read_uris(s, ctx, o.stream);
        if (const nlohmann::json* f = s.raw("fields")) {
          std::string path = s.field_path("fields");
          if (f->is_array()) {
            for (const auto& x : *f) {
              if (!x.is_string())
                throw_spec_error(
                    path,
                    "expected a list of extensions like [\"jpg\", \"cls\"], got " + f->dump());
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
        return make_tar_source(o);
      });
}

}  // namespace

void register_format_builders(Registry& r) {
  register_text_source(r);
  register_files_source(r);
  register_record_sources(r);
  register_tar_source(r);
}

}  // namespace dataecho
