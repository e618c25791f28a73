// Spec builders for variable-length data: the tokenize map function, padded_batch,
// unbatch, pack and bucket (docs/text.md).
#include "dataecho/formats/tokenize.h"
#include "dataecho/ops/bucket.h"
#include "dataecho/ops/pack.h"
#include "dataecho/ops/padded_batch.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

// "fields": ["tokens"] or {"tokens": {"length": 128, "value": 0, "truncate": true},
// "mask": {"multiple": 8}}: each field to the longest, a fixed length or a multiple.
PadField read_pad_field(const std::string& name, const nlohmann::json& v, const std::string& path) {
  PadField p{name};
  SpecObject o(v, path);
  if (o.has("length") && o.has("multiple"))
    throw_spec_error(path, "give \"length\" or \"multiple\", not both");
  if (o.has("length")) {
    p.to = PadField::To::kFixed;
    p.length = o.get_int("length", std::nullopt, 1);
  } else if (o.has("multiple")) {
    p.to = PadField::To::kMultiple;
    p.length = o.get_int("multiple", std::nullopt, 1);
  }
  p.value = o.get_number("value", 0);
  p.truncate = o.get_bool("truncate", false);
  if (p.truncate && p.to != PadField::To::kFixed)
    throw_spec_error(o.field_path("truncate"), "truncate needs a fixed \"length\"");
  o.finish();
  return p;
}

PadOptions read_pad_options(SpecObject& s) {
  PadOptions o;
  if (const nlohmann::json* f = s.raw("fields")) {
    const std::string path = s.field_path("fields");
    if (f->is_array()) {
      for (const auto& x : *f) {
        if (!x.is_string())
          throw_spec_error(path, "expected a list of field names, got " + f->dump());
        o.fields.push_back(PadField{x.get<std::string>()});
      }
    } else if (f->is_object()) {
      for (const auto& [name, v] : f->items())
        o.fields.push_back(read_pad_field(name, v, path + "." + name));
    } else {
      throw_spec_error(path,
                       "expected a list of field names or an object {field: {\"length\" | "
                       "\"multiple\", \"value\"}}, got " +
                           f->dump());
    }
    if (o.fields.empty()) throw_spec_error(path, "expected at least one field");
  }
  o.lengths = s.get_bool("lengths", true);
  return o;
}

// A list of integers >= `min` (empty when absent).
std::vector<int64_t> read_ints(SpecObject& s, const std::string& key, int64_t min) {
  std::vector<int64_t> out;
  const nlohmann::json* v = s.raw(key);
  if (!v) return out;
  std::string expected = "expected a list of integers >= ";  // appended: GCC 12 warns
  expected += std::to_string(min);                           // falsely on literal + string
  if (!v->is_array()) throw_spec_error(s.field_path(key), expected + ", got " + v->dump());
  for (const auto& x : *v) {
    if (!x.is_number_integer() || x.get<int64_t>() < min)
      throw_spec_error(s.field_path(key), expected + ", got " + v->dump());
    out.push_back(x.get<int64_t>());
  }
  return out;
}

DatasetPtr build_pack(SpecObject& s, DatasetPtr in, BuildContext&) {
  PackOptions o;
  o.length = s.get_int("length", std::nullopt, 1);
  o.field = s.get_string("field", o.field);
  o.document_field = s.get_string("document_field", o.document_field);
  o.ids_field = s.get_string("ids_field", o.ids_field);
  o.epochs_field = s.get_string("epochs_field", o.epochs_field);
  o.echoes_field = s.get_string("echoes_field", o.echoes_field);
  if (s.has("eos_id"))
    o.eos_id = static_cast<int32_t>(s.get_int("eos_id", 0, INT32_MIN, INT32_MAX));
  o.pad_id = static_cast<int32_t>(s.get_int("pad_id", 0, INT32_MIN, INT32_MAX));
  o.drop_remainder = s.get_bool("drop_remainder", false);
  return make_pack(std::move(in), o);
}

DatasetPtr build_bucket(SpecObject& s, DatasetPtr in, BuildContext&) {
  BucketOptions o;
  o.field = s.get_string("field", o.field);
  o.boundaries = read_ints(s, "boundaries", 1);
  o.batch_sizes = read_ints(s, "batch_sizes", 1);
  if (s.has("token_budget")) o.token_budget = s.get_int("token_budget", std::nullopt, 1);
  if (o.batch_sizes.empty() == (o.token_budget == 0))
    throw_spec_error(s.path(), "give \"batch_sizes\" (one per bucket) or \"token_budget\"");
  if (!o.batch_sizes.empty() && o.batch_sizes.size() != o.boundaries.size() + 1)
    throw_spec_error(s.field_path("batch_sizes"),
                     "expected " + std::to_string(o.boundaries.size() + 1) +
                         " batch sizes (one per bucket: boundaries + 1), got " +
                         std::to_string(o.batch_sizes.size()));
  o.drop_remainder = s.get_bool("drop_remainder", false);
  o.pad = read_pad_options(s);
  try {
    return make_bucket(std::move(in), o);
  } catch (const Error& e) {
    throw_spec_error(s.field_path("boundaries"), e.message());
  }
}

// {"tokenizer": "bytes" | "chars" | "words" | "sentencepiece", "vocab", "model", "unk",
// "eos_id", "add_eos", "field", "output", "keep_input"}. Paths are as given (relative
// ones to the working directory: a map function does not know the spec's folder).
MapFn build_tokenize(SpecObject& a) {
  TokenizeOptions o;
  const std::string kind =
      a.get_string("tokenizer", "bytes", {"bytes", "chars", "words", "sentencepiece"});
  o.kind = kind == "bytes"   ? TokenizeOptions::Kind::kBytes
           : kind == "chars" ? TokenizeOptions::Kind::kChars
           : kind == "words" ? TokenizeOptions::Kind::kWords
                             : TokenizeOptions::Kind::kSentencePiece;
  const bool vocab = kind == "chars" || kind == "words";
  if (vocab) o.vocab = a.get_string("vocab");
  if (kind == "sentencepiece") o.model = a.get_string("model");
  if (vocab) o.unk = a.get_string("unk", o.unk);
  if (a.has("eos_id")) o.eos_id = static_cast<int32_t>(a.get_int("eos_id", 0, 0, INT32_MAX));
  o.add_eos = a.get_bool("add_eos", true);
  o.field = a.get_string("field", o.field);
  o.output = a.get_string("output", o.output);
  o.keep_input = a.get_bool("keep_input", false);
  return make_tokenize_fn(o);
}

}  // namespace

void register_sequence_builders(Registry& r) {
  r.map_fns["tokenize"] = build_tokenize;
  r.stages["padded_batch"] = [](SpecObject& s, DatasetPtr in, BuildContext&) {
    PaddedBatchOptions o;
    o.size = s.get_int("size", std::nullopt, 1);
    o.drop_remainder = s.get_bool("drop_remainder", false);
    o.pad = read_pad_options(s);
    return make_padded_batch(std::move(in), o);
  };
  r.stages["pack"] = build_pack;
  r.stages["bucket"] = build_bucket;
  r.stages["unbatch"] = [](SpecObject&, DatasetPtr in, BuildContext&) {
    return make_unbatch(std::move(in));
  };
}

}  // namespace dataecho
