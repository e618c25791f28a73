// Spec builders for variable-length data: the tokenize map function, padded_batch,
// unbatch, pack and bucket (docs/text.md).
#include "dataecho/formats/tokenize.h"
#include "dataecho/ops/bucket.h"
#include "dataecho/ops/pack.h"
#include "dataecho/ops/padded_batch.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

// One field's padding in "fields": {"length": 128, "value": 0, "truncate": true} or
// {"multiple": 8}.
const std::vector<OptionDecl>& pad_field_options() {
  static const std::vector<OptionDecl> options = {
      {.name = "length", .min = 1, .max = kMaxSequenceLength, .doc = "a fixed length"},
      {.name = "multiple",
       .min = 1,
       .max = kMaxSequenceLength,
       .doc = "the longest, rounded up to a multiple of this"},
      {.name = "value", .type = OptionType::kNumber, .fallback = 0, .doc = "the pad value"},
      {.name = "truncate",
       .type = OptionType::kBool,
       .fallback = false,
       .doc = "cut longer rows (with \"length\"); otherwise they are an error"}};
  return options;
}

// "fields": ["tokens"] or {"tokens": {"length": 128, "value": 0, "truncate": true},
// "mask": {"multiple": 8}}: each field to the longest, a fixed length or a multiple.
PadField read_pad_field(const std::string& name, const nlohmann::json& v, const std::string& path) {
  PadField p{name};
  SpecObject o(v, path);
  o.declare(pad_field_options(), "padding");
  if (o.has("length") && o.has("multiple"))
    throw_spec_error(path, "give \"length\" or \"multiple\", not both");
  if (o.has("length")) {
    p.to = PadField::To::kFixed;
    p.length = o.get_int("length");
  } else if (o.has("multiple")) {
    p.to = PadField::To::kMultiple;
    p.length = o.get_int("multiple");
  }
  p.value = o.get_number("value");
  p.truncate = o.get_bool("truncate");
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
  o.lengths = s.get_bool("lengths");
  return o;
}

// The padding options of padded_batch and bucket.
std::vector<OptionDecl> pad_options() {
  return {{.name = "fields",
           .type = OptionType::kJson,
           .default_text = "every field of rank >= 1, to the batch's longest, with 0",
           .shape = "a list of field names, or an object {field: {\"length\" | \"multiple\": "
                    "n, \"value\": v, \"truncate\": bool}}",
           .doc = "the fields to pad and how"},
          {.name = "lengths",
           .type = OptionType::kBool,
           .fallback = true,
           .doc = "add `<field>_length` per padded field"}};
}

// A declared list of integers (empty when absent).
std::vector<int64_t> read_ints(SpecObject& s, const std::string& key) {
  std::vector<int64_t> out;
  const OptionDecl& d = *s.declaration(key);
  const nlohmann::json* v = s.raw(key);
  if (!v) return out;
  const std::string expected = "expected " + describe_type(d);
  if (!v->is_array()) throw_spec_error(s.field_path(key), expected + ", got " + v->dump());
  for (const auto& x : *v) {
    if (!x.is_number_integer() || (d.min && x.get<int64_t>() < *d.min) ||
        (d.max && x.get<int64_t>() > *d.max))
      throw_spec_error(s.field_path(key), expected + ", got " + v->dump());
    out.push_back(x.get<int64_t>());
  }
  return out;
}

OpSchema pack_schema() {
  const PackOptions d;
  return {"pack",
          "Concatenates token sequences into blocks of `length` tokens, with the ids of the "
          "sequences in each block and a per-token document field (docs/text.md).",
          {{.name = "length",
            .required = true,
            .min = 1,
            .max = kMaxSequenceLength,
            .doc = "tokens per block"},
           {.name = "eos_id",
            .min = INT32_MIN,
            .max = INT32_MAX,
            .default_text = "none",
            .doc = "appended after each sequence that does not end with it"},
           {.name = "pad_id",
            .fallback = d.pad_id,
            .min = INT32_MIN,
            .max = INT32_MAX,
            .doc = "fills the last block"},
           {.name = "drop_remainder",
            .type = OptionType::kBool,
            .fallback = d.drop_remainder,
            .doc = "drop a last, partial block"},
           {.name = "field",
            .type = OptionType::kString,
            .fallback = d.field,
            .doc = "the tokens (int32 [n])"},
           {.name = "document_field",
            .type = OptionType::kString,
            .fallback = d.document_field,
            .doc = "per token, the index of its sequence in the block"},
           {.name = "ids_field",
            .type = OptionType::kString,
            .fallback = d.ids_field,
            .doc = "the ids of the block's sequences"},
           {.name = "epochs_field",
            .type = OptionType::kString,
            .fallback = d.epochs_field,
            .doc = "each sequence's epoch (\"\": not written)"},
           {.name = "echoes_field",
            .type = OptionType::kString,
            .fallback = d.echoes_field,
            .doc = "each sequence's echo index (\"\": not written)"}}};
}

DatasetPtr build_pack(SpecObject& s, DatasetPtr in, BuildContext&) {
  PackOptions o;
  o.length = s.get_int("length");
  o.field = s.get_string("field");
  o.document_field = s.get_string("document_field");
  o.ids_field = s.get_string("ids_field");
  o.epochs_field = s.get_string("epochs_field");
  o.echoes_field = s.get_string("echoes_field");
  if (s.has("eos_id")) o.eos_id = static_cast<int32_t>(s.get_int("eos_id"));
  o.pad_id = static_cast<int32_t>(s.get_int("pad_id"));
  o.drop_remainder = s.get_bool("drop_remainder");
  return make_pack(std::move(in), o);
}

OpSchema bucket_schema() {
  const BucketOptions d;
  OpSchema schema{
      "bucket",
      "Batches sequences of similar length together (tf.data's bucket_by_sequence_length), "
      "padded as padded_batch pads.",
      {{.name = "boundaries",
        .type = OptionType::kInts,
        .min = 1,
        .max = kMaxSequenceLength,
        .default_text = "none: one bucket",
        .written = Written::kAlways,
        .doc = "increasing lengths that split the buckets"},
       {.name = "batch_sizes",
        .type = OptionType::kInts,
        .fallback = nlohmann::json::array(),
        .min = 1,
        .max = kMaxBatchSize,
        .default_text = "none",
        .written = Written::kUnlessDefault,
        .doc = "one per bucket (boundaries + 1); or token_budget"},
       {.name = "token_budget",
        .min = 1,
        .max = kMaxTokenBudget,
        .doc = "instead of batch_sizes: a batch's padded tokens"},
       {.name = "field",
        .type = OptionType::kString,
        .fallback = d.field,
        .doc = "the field whose length picks the bucket"},
       {.name = "drop_remainder",
        .type = OptionType::kBool,
        .fallback = d.drop_remainder,
        .doc = "drop each bucket's last, smaller batch"}}};
  for (OptionDecl& p : pad_options()) schema.options.push_back(std::move(p));
  return schema;
}

DatasetPtr build_bucket(SpecObject& s, DatasetPtr in, BuildContext&) {
  BucketOptions o;
  o.field = s.get_string("field");
  o.boundaries = read_ints(s, "boundaries");
  o.batch_sizes = read_ints(s, "batch_sizes");
  if (s.has("token_budget")) o.token_budget = s.get_int("token_budget");
  if (o.batch_sizes.empty() == (o.token_budget == 0))
    throw_spec_error(s.path(), "give \"batch_sizes\" (one per bucket) or \"token_budget\"");
  if (!o.batch_sizes.empty() && o.batch_sizes.size() != o.boundaries.size() + 1)
    throw_spec_error(s.field_path("batch_sizes"),
                     "expected " + std::to_string(o.boundaries.size() + 1) +
                         " batch sizes (one per bucket: boundaries + 1), got " +
                         std::to_string(o.batch_sizes.size()));
  o.drop_remainder = s.get_bool("drop_remainder");
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
OpSchema tokenize_schema() {
  const TokenizeOptions d;
  return {"tokenize",
          "Text (uint8 bytes) to token ids (int32 [n]) (docs/text.md).",
          {{.name = "tokenizer",
            .type = OptionType::kString,
            .fallback = "bytes",
            .choices = {"bytes", "chars", "words", "sentencepiece"},
            .doc = "bytes (ids 0-255), characters or words of a vocabulary, or a "
                   "SentencePiece model"},
           {.name = "vocab",
            .type = OptionType::kString,
            .doc = "chars and words: the vocabulary file, a token per line (required)"},
           {.name = "model",
            .type = OptionType::kString,
            .doc = "sentencepiece: the .model file (required)"},
           {.name = "unk",
            .type = OptionType::kString,
            .fallback = d.unk,
            .doc = "chars and words: the token for what the vocabulary lacks"},
           {.name = "eos_id",
            .min = 0,
            .max = INT32_MAX,
            .default_text = "the tokenizer's (bytes: none)",
            .doc = "the end-of-sequence id"},
           {.name = "add_eos",
            .type = OptionType::kBool,
            .fallback = d.add_eos,
            .doc = "append the end-of-sequence id"},
           {.name = "field",
            .type = OptionType::kString,
            .fallback = d.field,
            .doc = "the input field"},
           {.name = "output",
            .type = OptionType::kString,
            .fallback = d.output,
            .doc = "the output field"},
           {.name = "keep_input",
            .type = OptionType::kBool,
            .fallback = d.keep_input,
            .doc = "keep the input field (otherwise it is dropped)"}}};
}

MapFn build_tokenize(SpecObject& a) {
  TokenizeOptions o;
  const std::string kind = a.get_string("tokenizer");
  o.kind = kind == "bytes"   ? TokenizeOptions::Kind::kBytes
           : kind == "chars" ? TokenizeOptions::Kind::kChars
           : kind == "words" ? TokenizeOptions::Kind::kWords
                             : TokenizeOptions::Kind::kSentencePiece;
  const bool vocab = kind == "chars" || kind == "words";
  if (vocab) o.vocab = a.get_string("vocab");
  if (kind == "sentencepiece") o.model = a.get_string("model");
  if (vocab) o.unk = a.get_string("unk");
  if (a.has("eos_id")) o.eos_id = static_cast<int32_t>(a.get_int("eos_id"));
  o.add_eos = a.get_bool("add_eos");
  o.field = a.get_string("field");
  o.output = a.get_string("output");
  o.keep_input = a.get_bool("keep_input");
  return make_tokenize_fn(o);
}

}  // namespace

void register_sequence_builders(Registry& r) {
  r.add_map_fn(tokenize_schema(), build_tokenize);
  OpSchema padded{"padded_batch",
                  "Batches elements of different lengths, padding each variable-length field "
                  "(docs/text.md).",
                  batch_options()};
  for (OptionDecl& p : pad_options()) padded.options.push_back(std::move(p));
  r.add_stage(std::move(padded), [](SpecObject& s, DatasetPtr in, BuildContext&) {
    PaddedBatchOptions o;
    o.size = s.get_int("size");
    o.drop_remainder = s.get_bool("drop_remainder");
    o.pad = read_pad_options(s);
    return make_padded_batch(std::move(in), o);
  });
  r.add_stage(pack_schema(), build_pack);
  r.add_stage(bucket_schema(), build_bucket);
  r.add_stage(
      {"unbatch",
       "Splits each batch into its rows, cutting padding off by "
       "`<field>_length`.",
       {}},
      [](SpecObject&, DatasetPtr in, BuildContext&) { return make_unbatch(std::move(in)); });
}

}  // namespace dataecho
