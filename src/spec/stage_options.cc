// declared_options and tunable (stage_options.h).
// Written by scripts/gen_spec.py from the operators' declarations: do not edit.
#include "dataecho/spec/stage_options.h"

#include "dataecho/spec/pipeline_def.h"

namespace dataecho {
namespace {

using nlohmann::json;

template <class T>
json given(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json tunable(int64_t n) { return n == kAutotune ? json("auto") : json(n); }

json declared_options(const MapStageOptions& o) {
  json j;
  j["parallelism"] = tunable(o.parallelism);
  j["deterministic"] = given(o.deterministic);
  j["buffer"] = given(o.buffer);
  return j;
}

json declared_options(const ShuffleStageOptions& o) {
  json j;
  j["buffer"] = o.buffer;
  j["seed"] = given(o.seed);
  j["reshuffle_each_iteration"] = given(o.reshuffle_each_iteration);
  return j;
}

json declared_options(const BatchStageOptions& o) {
  json j;
  j["size"] = o.size;
  j["drop_remainder"] = o.drop_remainder;
  return j;
}

json declared_options(const PaddedBatchStageOptions& o) {
  json j;
  j["size"] = o.size;
  j["drop_remainder"] = o.drop_remainder;
  j["fields"] = o.fields;
  j["lengths"] = o.lengths;
  return j;
}

json declared_options(const PackStageOptions& o) {
  json j;
  j["length"] = o.length;
  j["eos_id"] = given(o.eos_id);
  j["pad_id"] = given(o.pad_id);
  j["drop_remainder"] = o.drop_remainder;
  j["field"] = given(o.field);
  j["document_field"] = given(o.document_field);
  j["ids_field"] = given(o.ids_field);
  j["epochs_field"] = given(o.epochs_field);
  j["echoes_field"] = given(o.echoes_field);
  return j;
}

json declared_options(const BucketStageOptions& o) {
  json j;
  j["boundaries"] = o.boundaries;
  j["batch_sizes"] = o.batch_sizes;
  j["token_budget"] = given(o.token_budget);
  j["field"] = given(o.field);
  j["drop_remainder"] = o.drop_remainder;
  j["fields"] = o.fields;
  j["lengths"] = o.lengths;
  return j;
}

json declared_options(const EchoStageOptions& o) {
  json j;
  j["factor"] = o.autotune ? json("auto") : o.adaptive ? json("adaptive") : json(o.factor);
  j["max_factor"] = given(o.max_factor);
  j["buffer"] = given(o.buffer);
  j["buffer_bytes"] = given(o.buffer_bytes);
  j["seed"] = given(o.seed);
  return j;
}

json declared_options(const InterleaveStageOptions& o) {
  json j;
  j["cycle"] = o.cycle;
  j["parallelism"] = o.parallelism ? tunable(*o.parallelism) : nullptr;
  j["buffer_per_shard"] = given(o.buffer_per_shard);
  return j;
}

json declared_options(const CacheStageOptions& o) {
  json j;
  j["path"] = o.path;
  j["key"] = given(o.key);
  j["max_bytes"] = given(o.max_bytes);
  j["on_full"] = o.prefix ? "prefix" : "fail";
  j["allow_shuffled"] = o.allow_shuffled;
  return j;
}

}  // namespace dataecho
