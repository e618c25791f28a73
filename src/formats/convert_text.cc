// Text files into TFRecord or tar shards (see dataecho/formats/convert.h). The records
// are read by the `text` source itself, so that what is written is what a `text`
// pipeline over the same files gives: the same splitting, gzip handling, UTF-8 and
// length checks and errors (file, line, byte offset).
#include <string>

#include "convert_sink.h"
#include "dataecho/formats/text.h"

namespace dataecho::convert_detail {
namespace {

DatasetPtr text_dataset(const ConvertOptions& o, const std::vector<std::string>& uris) {
  TextOptions t;
  t.uris = uris;
  t.separator = o.separator;
  t.max_bytes = o.max_bytes;
  if (o.jsonl) {
    t.format = TextOptions::Format::kJsonLines;
    t.fields = {{"text", o.field}};
  }
  DatasetPtr ds = make_text_source(t);
  // Labelled as a pipeline labels its nodes, so that errors read "text: ...".
  std::const_pointer_cast<Dataset>(ds)->attach("text", std::make_shared<NodeStats>("text"));
  return ds;
}

// The line (from 1) of `uri` that starts at byte `at`, counted by reading the file again
// with the text source (so gzip reads alike); 0 if no line starts there. Error path only.
int64_t line_at(const ConvertOptions& o, const std::string& uri, int64_t at) {
  TextOptions t;
  t.uris = {uri};
  t.max_bytes = o.max_bytes;
  t.keep_empty = true;
  t.utf8 = false;
  const DatasetPtr ds = make_text_source(t);  // outlives its iterator
  auto it = ds->make_iterator({});
  for (int64_t line = 1; auto e = it->next(); ++line) {
    const int64_t offset = e->id() & ((int64_t{1} << kShardIdShift) - 1);
    if (offset == at) return line;
    if (offset > at) break;
  }
  return 0;
}

// The record's text; a JSON Lines key that is not a string is an error naming the file,
// the line and the byte offset (the record's id is file index << 40 | byte offset).
const Tensor& record_text(const ConvertOptions& o, const std::vector<std::string>& uris,
                          const Example& e) {
  const Tensor& t = e.get("text");
  if (t.dtype() != DType::kUInt8 || t.shape().size() != 1) {
    const std::string& uri = uris[static_cast<size_t>(e.id() >> kShardIdShift)];
    const int64_t at = e.id() & ((int64_t{1} << kShardIdShift) - 1);
    convert_error(ErrorCode::kInvalidArgument,
                  "line " + std::to_string(line_at(o, uri, at)) + ": key \"" + o.field +
                      "\" holds " + dtype_name(t.dtype()) + " " + shape_to_string(t.shape()) +
                      ", not a string",
                  uri + " record at byte " + std::to_string(at));
  }
  return t;
}

int64_t count_records(const ConvertOptions& o, const std::vector<std::string>& uris) {
  const DatasetPtr ds = text_dataset(o, uris);  // outlives its iterator
  auto it = ds->make_iterator({});
  int64_t n = 0;
  while (o.limit < 0 || n < o.limit) {
    auto e = it->next();
    if (!e) break;
    record_text(o, uris, *e);
    ++n;
  }
  return n;
}

}  // namespace

ConvertSummary convert_text(const ConvertOptions& o,
                            const std::function<void(int64_t, int64_t, int64_t)>& progress) {
  if (o.to != "tfrecord" && o.to != "tar")
    convert_error(ErrorCode::kInvalidArgument, "text converts to tfrecord or tar, not " + o.to, "");
  const std::vector<std::string> uris = expand_uris(o.text);
  const int64_t total = count_records(o, uris);
  ShardSink sink(o, total);
  const DatasetPtr ds = text_dataset(o, uris);  // outlives its iterator
  auto it = ds->make_iterator({});
  for (int64_t i = 0; i < total; ++i) {
    auto e = it->next();
    if (!e)
      convert_error(ErrorCode::kDataLoss,
                    "the input changed while it was converted (" + std::to_string(i) +
                        " records the second time, " + std::to_string(total) + " the first)",
                    "");
    sink.add_text(i, record_text(o, uris, *e));
    if (progress && ((i + 1) % 4096 == 0 || i + 1 == total)) progress(i + 1, total, sink.bytes());
  }
  sink.close_shard();
  return {sink.files(), total, sink.bytes()};
}

}  // namespace dataecho::convert_detail
