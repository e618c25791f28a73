// Spec builders for the file sources: idx, tfrecord, tar (see docs/formats.md).
#include "dataecho/formats/idx.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

std::string resolve(const std::string& path, const BuildContext& ctx) {
  if (path.empty() || path[0] == '/' || is_http_uri(path) || ctx.base_dir.empty()) return path;
  if (path.rfind("file://", 0) == 0) return path;
  return ctx.base_dir + "/" + path;
}

OnError read_on_error(SpecObject& s) {
  return parse_on_error(s.get_string("on_error", "fail", {"fail", "skip", "echo"}));
}

StreamOptions read_stream_options(SpecObject& s) {
  StreamOptions o;
  o.buffer_bytes = static_cast<size_t>(
      s.get_int("buffer_bytes", static_cast<int64_t>(o.buffer_bytes), 1, int64_t{1} << 30));
  return o;
}

}  // namespace

void register_format_builders(Registry& r) {
  r.sources["idx"] = [](SpecObject& s, BuildContext& ctx) {
    IdxOptions o;
    o.images = resolve(s.get_string("images"), ctx);
    o.labels = s.has("labels") ? resolve(s.get_string("labels"), ctx) : "";
    o.limit = s.get_int("limit", -1, -1);
    o.on_error = read_on_error(s);
    o.stream = read_stream_options(s);
    return make_idx_source(o);
  };
}

}  // namespace dataecho
