#include "dataecho/spec/pipeline_def.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "dataecho/core/hash.h"
#include "dataecho/core/rng.h"
#include "dataecho/ops/fusion.h"
#include "dataecho/ops/pack.h"
#include "dataecho/spec/memory_check.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/spec_reader.h"
#include "elastic_build.h"

namespace dataecho {
namespace {

// Labels a node ("3:shuffle") and gives it its stats. The datasets are still private to
// the build here: nothing iterates them yet.
void attach(const DatasetPtr& ds, const std::string& prefix, int64_t index,
            std::vector<DatasetPtr>& nodes) {
  std::string label = prefix + std::to_string(index) + ":" + ds->op_name();
  std::const_pointer_cast<Dataset>(ds)->attach(
      label, std::make_shared<NodeStats>(label, ds->owns_threads()));
  nodes.push_back(ds);
}

// An integral factor is written as an integer ("factor": 2), as a person would.
nlohmann::json factor_json(double f) {
  if (f == static_cast<double>(static_cast<int64_t>(f))) return static_cast<int64_t>(f);
  return f;
}

nlohmann::json with_field(nlohmann::json options, const char* key, nlohmann::json value) {
  options[key] = std::move(value);
  return options;
}

std::string stage_path(size_t index) { return "$.stages[" + std::to_string(index) + "]"; }

// The spec's "memory_check" object of `top`, checked by its declaration (registry.cc).
MemoryCheckOptions read_memory_check(SpecObject& top) {
  SpecObject mc = top.get_object("memory_check");
  MemoryCheckOptions o;
  if (mc.has("share")) o.share = mc.get_number("share");
  if (mc.has("limit_mb")) o.limit_mb = mc.get_number("limit_mb");
  if (mc.has("action")) o.action = mc.get_string("action");
  mc.finish();
  return o;
}

[[noreturn]] void edit_error(size_t index, const std::string& op, const std::string& message) {
  throw_spec_error(stage_path(index) + (op.empty() ? "" : " (" + op + ")"), message);
}

}  // namespace

nlohmann::json StageDef::to_json() const {
  nlohmann::json j = options.is_object() ? options : nlohmann::json::object();
  j["op"] = op;
  return j;
}

std::string StageDef::fn() const {
  return options.is_object() && options.contains("fn") && options["fn"].is_string()
             ? options["fn"].get<std::string>()
             : "";
}

PipelineDef::PipelineDef(std::string kind, nlohmann::json options)
    : source_kind_(std::move(kind)),
      source_options_(options.is_null() ? nlohmann::json::object() : std::move(options)) {
  source_options_.erase("kind");
}

PipelineDef PipelineDef::from_dataset(DatasetPtr source, std::string fingerprint) {
  PipelineDef d;
  d.source_dataset_ = std::move(source);
  d.source_fingerprint_ = std::move(fingerprint);
  return d;
}

PipelineDef& PipelineDef::stage(std::string op, nlohmann::json options) {
  stages_.push_back(
      {std::move(op), options.is_null() ? nlohmann::json::object() : std::move(options)});
  has_stages_ = true;
  return *this;
}

PipelineDef& PipelineDef::declared_stage(const std::string& op, const nlohmann::json& given) {
  const OpSchema* schema = Registry::find(registry().stage_schemas, op);
  const std::string path = stage_path(stages_.size());
  nlohmann::json options = nlohmann::json::object();
  if (given.is_object()) {
    for (const auto& [key, value] : given.items()) {
      if (value.is_null()) continue;
      nlohmann::json v = value;
      if (const OptionDecl* d = schema ? schema->find(key) : nullptr) {
        check_type(*d, v, path + "." + key);
        const bool number = d->type == OptionType::kNumber || d->type == OptionType::kFactor;
        if (number && v.is_number_float() && std::abs(v.get<double>()) < 9e15)
          v = factor_json(v.get<double>());
        if (omitted_at_default(*d) && v == d->fallback) continue;
      }
      options[key] = std::move(v);
    }
  }
  return stage(op, std::move(options));
}

// The typed methods give their options as they are (stage_options.h, declared_options)
// to declared_stage, which writes them by their declarations' Written policy, as it does
// the Python package's: one writer for every way of making a stage.
PipelineDef& PipelineDef::map(std::string fn, nlohmann::json args, MapStageOptions o) {
  nlohmann::json j = declared_options(o);
  j["fn"] = std::move(fn);
  j["args"] = std::move(args);
  return declared_stage("map", j);
}

PipelineDef& PipelineDef::filter(std::string fn, nlohmann::json args) {
  return declared_stage("filter", {{"fn", std::move(fn)}, {"args", std::move(args)}});
}

PipelineDef& PipelineDef::interleave(InterleaveStageOptions o) {
  return declared_stage("interleave", declared_options(o));
}
PipelineDef& PipelineDef::shuffle(ShuffleStageOptions o) {
  return declared_stage("shuffle", declared_options(o));
}
PipelineDef& PipelineDef::echo(EchoStageOptions o) {
  return declared_stage("echo", declared_options(o));
}
PipelineDef& PipelineDef::batch(BatchStageOptions o) {
  return declared_stage("batch", declared_options(o));
}
PipelineDef& PipelineDef::padded_batch(PaddedBatchStageOptions o) {
  return declared_stage("padded_batch", declared_options(o));
}
PipelineDef& PipelineDef::unbatch() { return stage("unbatch"); }

PipelineDef& PipelineDef::pack(PackStageOptions o) {
  if (o.reads) {  // the fields' default names, unless named
    o.epochs_field = o.epochs_field.value_or(kPackEpochsField);
    o.echoes_field = o.echoes_field.value_or(kPackEchoesField);
  }
  return declared_stage("pack", declared_options(o));
}

PipelineDef& PipelineDef::bucket(BucketStageOptions o) {
  return declared_stage("bucket", declared_options(o));
}
PipelineDef& PipelineDef::prefetch(int64_t buffer) {
  return declared_stage("prefetch", {{"buffer", tunable(buffer)}});
}
PipelineDef& PipelineDef::cache(CacheStageOptions o) {
  return declared_stage("cache", declared_options(o));
}
PipelineDef& PipelineDef::repeat(int64_t count) {
  return declared_stage("repeat", {{"count", count}});
}
PipelineDef& PipelineDef::take(int64_t count) { return declared_stage("take", {{"count", count}}); }
PipelineDef& PipelineDef::skip(int64_t count) { return declared_stage("skip", {{"count", count}}); }
PipelineDef& PipelineDef::shard(int64_t num_shards, int64_t index) {
  return declared_stage("shard", {{"num_shards", num_shards}, {"index", index}});
}
PipelineDef& PipelineDef::seed(uint64_t seed) {
  seed_ = seed;
  return *this;
}
PipelineDef& PipelineDef::deterministic(bool on) {
  deterministic_ = on;
  return *this;
}
// Checked by the declaration that reads a spec's "memory_check" (the same messages).
PipelineDef& PipelineDef::memory_check(MemoryCheckOptions options) {
  nlohmann::json given = nlohmann::json::object();
  if (options.share) given["share"] = *options.share;
  if (options.limit_mb) given["limit_mb"] = *options.limit_mb;
  if (options.action) given["action"] = *options.action;
  const nlohmann::json spec = {{"memory_check", std::move(given)}};  // SpecObject refers to it
  SpecObject top(spec, "$");
  top.declare(pipeline_schema());
  memory_check_ = read_memory_check(top);
  return *this;
}

PipelineDef& PipelineDef::autotune(AutotuneOptions options) {
  autotune_ = options;
  return *this;
}

std::optional<size_t> PipelineDef::find(const std::string& op, const std::string& fn,
                                        size_t from) const {
  for (size_t i = from; i < stages_.size(); ++i)
    if (stages_[i].op == op && (fn.empty() || stages_[i].fn() == fn)) return i;
  return std::nullopt;
}

void PipelineDef::insert(size_t at, std::vector<StageDef> stages) {
  if (at > stages_.size()) at = stages_.size();
  stages_.insert(stages_.begin() + static_cast<std::ptrdiff_t>(at),
                 std::make_move_iterator(stages.begin()), std::make_move_iterator(stages.end()));
  has_stages_ = true;
}

size_t PipelineDef::count(const std::string& op) const {
  return static_cast<size_t>(
      std::count_if(stages_.begin(), stages_.end(), [&](const StageDef& s) { return s.op == op; }));
}

const StageDef& PipelineDef::stage_at(size_t index) const {
  if (index >= stages_.size())
    edit_error(index, "",
               "no such stage: the pipeline has " + std::to_string(stages_.size()) +
                   (stages_.size() == 1 ? " stage" : " stages"));
  return stages_[index];
}

PipelineDef PipelineDef::with_shard_first(int64_t num_shards, int64_t index) const {
  if (const auto at = find("shard"))
    edit_error(*at, "shard",
               "the pipeline is sharded already; a shard stage put first would shard its "
               "shares again");
  PipelineDef shard;
  shard.shard(num_shards, index);
  PipelineDef d = *this;
  d.insert(0, shard.stages());
  return d;
}

PipelineDef PipelineDef::with_elastic_first(int64_t lanes, int64_t world_size, int64_t rank) const {
  for (const char* op : {"elastic", "shard"}) {
    if (const auto at = find(op))
      edit_error(*at, op,
                 std::string("the pipeline has a") + (op[0] == 'e' ? "n" : "") + " " + op +
                     " stage already; an elastic stage shares the data between ranks itself");
  }
  PipelineDef d = *this;
  d.insert(0,
           {StageDef{"elastic", {{"lanes", lanes}, {"world_size", world_size}, {"rank", rank}}}});
  return d;
}

PipelineDef PipelineDef::with_mixed_seed(std::initializer_list<uint64_t> salts) const {
  uint64_t mixed = seed();
  for (uint64_t salt : salts) mixed = mix_seed(mixed, salt);
  PipelineDef d = *this;
  d.seed_ = mixed >> 1;
  return d;
}

PipelineDef PipelineDef::without(const std::string& op) const { return replacing(op, {}); }

PipelineDef PipelineDef::replacing(const std::string& op,
                                   const std::vector<StageDef>& stages) const {
  PipelineDef d = *this;
  d.stages_.clear();
  for (const StageDef& s : stages_) {
    if (s.op != op)
      d.stages_.push_back(s);
    else
      d.stages_.insert(d.stages_.end(), stages.begin(), stages.end());
  }
  return d;
}

PipelineDef PipelineDef::inserting(size_t at, std::vector<StageDef> stages) const {
  if (at > stages_.size())
    edit_error(at, "",
               "cannot insert there: the pipeline has " + std::to_string(stages_.size()) +
                   (stages_.size() == 1 ? " stage" : " stages"));
  PipelineDef d = *this;
  d.insert(at, std::move(stages));
  return d;
}

PipelineDef PipelineDef::inserting_after(size_t index, std::vector<StageDef> stages) const {
  stage_at(index);
  return inserting(index + 1, std::move(stages));
}

PipelineDef PipelineDef::with_option_json(size_t index, const std::string& key,
                                          nlohmann::json value) const {
  const StageDef& s = stage_at(index);
  if (key == "op") edit_error(index, s.op, "\"op\" is the stage's kind, not an option");
  PipelineDef d = *this;
  d.stages_[index].options[key] = std::move(value);
  return d;
}

PipelineDef PipelineDef::with_source_option(const std::string& key, nlohmann::json value) const {
  if (source_kind_.empty())
    throw_spec_error("$.source", "the pipeline has no source of a kind whose options could be set");
  if (key == "kind") throw_spec_error("$.source.kind", "the source's kind, not an option");
  PipelineDef d = *this;
  d.source_options_[key] = std::move(value);
  return d;
}

std::vector<StageDef> PipelineDef::stages_from_json(const nlohmann::json& stages) {
  if (!stages.is_array())
    throw_spec_error("$.stages",
                     std::string("expected a list of stages, got ") + stages.type_name());
  std::vector<StageDef> out;
  for (size_t i = 0; i < stages.size(); ++i) {
    SpecObject st(stages[i], stage_path(i));
    StageDef s;
    s.op = st.get_string("op");
    s.options = stages[i];
    s.options.erase("op");
    out.push_back(std::move(s));
  }
  return out;
}

PipelineDef PipelineDef::from_json(const nlohmann::json& spec) {
  PipelineDef d;
  SpecObject top(spec, "$");
  top.declare(pipeline_schema());
  if (top.has("seed")) d.seed_ = static_cast<uint64_t>(top.get_int("seed"));
  if (top.has("deterministic")) d.deterministic_ = top.get_bool("deterministic");
  if (top.has("autotune")) {
    SpecObject at = top.get_object("autotune");
    if (at.has("cpu_budget")) d.autotune_.cpu_budget = at.get_number("cpu_budget");
    if (at.has("ram_budget_mb")) d.autotune_.ram_budget_mb = at.get_number("ram_budget_mb");
    if (at.has("remember")) d.autotune_.remember = at.get_bool("remember");
    at.finish();
  }
  if (top.has("memory_check")) d.memory_check_ = read_memory_check(top);
  for (const char* key : {"name", "comment"}) {
    if (const nlohmann::json* v = top.raw(key)) d.extra_[key] = *v;
  }
  SpecObject src = top.get_object("source", true);
  d.source_kind_ = src.get_string("kind");
  d.source_options_ = spec.at("source");
  d.source_options_.erase("kind");
  if (const nlohmann::json* stages = top.raw("stages")) {
    d.stages_ = stages_from_json(*stages);
    d.has_stages_ = true;
  }
  top.finish();
  return d;
}

nlohmann::json PipelineDef::to_json() const {
  if (source_dataset_)
    throw Error(ErrorCode::kInvalidArgument, "spec",
                "a pipeline made from a dataset has no JSON form (its source is not a spec)");
  nlohmann::json j = extra_;
  if (seed_) j["seed"] = *seed_;
  if (deterministic_) j["deterministic"] = *deterministic_;
  if (autotune_.cpu_budget) j["autotune"]["cpu_budget"] = *autotune_.cpu_budget;
  if (autotune_.ram_budget_mb) j["autotune"]["ram_budget_mb"] = *autotune_.ram_budget_mb;
  if (!autotune_.remember) j["autotune"]["remember"] = false;
  if (memory_check_.share) j["memory_check"]["share"] = *memory_check_.share;
  if (memory_check_.limit_mb) j["memory_check"]["limit_mb"] = *memory_check_.limit_mb;
  if (memory_check_.action) j["memory_check"]["action"] = *memory_check_.action;
  j["source"] = with_field(source_options_, "kind", source_kind_);
  if (lists_stages()) j["stages"] = stages_to_json();
  return j;
}

nlohmann::json PipelineDef::stages_to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : stages_) j.push_back(s.to_json());
  return j;
}

nlohmann::json PipelineDef::canonical_json() const {
  // The definition as JSON, serialized once: the builders read their options from it
  // and the state fingerprint hashes it. A pipeline over a dataset has only its stages.
  nlohmann::json canonical;
  if (source_dataset_) {
    canonical["stages"] = stages_to_json();
  } else {
    canonical = to_json();
    // The budgets change how fast the pipeline runs, never what it produces: a state
    // saved under one budget restores under another.
    canonical.erase("autotune");
    canonical.erase("memory_check");  // nor does the memory check
  }
  return canonical;
}

namespace {
// What the state fingerprint hashes: the canonical JSON without the elastic stage's
// options that say where the pipeline runs (its world size and rank), so that a state
// restores on another number of ranks. Other definitions hash as they are.
// A service source's options that say where the dispatcher is and how the trainer
// reads, not what the upstream produces: out of the state fingerprint, so that a moved
// dispatcher (or another token file or CA) still resumes, every consumer (rank) of a job
// fingerprints alike, and so does every epoch (a saved state names its epoch itself);
// "scale" says who changes the workers, which elements they make does not depend on.
constexpr const char* kServiceRuntimeOptions[] = {
    "dispatcher", "token_file", "connect_timeout_s", "buffer_mb",       "consumers",
    "consumer",   "epoch",      "ca_file",           "ca_path",         "tls_server_name",
    "scale"};

nlohmann::json fingerprinted(const nlohmann::json& canonical) {
  nlohmann::json j = canonical;
  if (j.contains("source") && j["source"].is_object() && j["source"].value("kind", "") == "service")
    for (const char* key : kServiceRuntimeOptions) j["source"].erase(key);
  if (j.contains("stages") && elastic_build::first_is_elastic(j["stages"]))
    for (const char* key : elastic_build::kRuntimeOptions) j["stages"][0].erase(key);
  return j;
}
}  // namespace

DatasetPtr PipelineDef::build_nodes(const BuildOptions& options, const std::string& label_prefix,
                                    std::vector<DatasetPtr>& nodes) const {
  return build_nodes(options, label_prefix, nodes, canonical_json());
}

DatasetPtr PipelineDef::build_nodes(const BuildOptions& options, const std::string& label_prefix,
                                    std::vector<DatasetPtr>& nodes,
                                    const nlohmann::json& canonical) const {
  BuildContext ctx;
  ctx.seed = seed();
  ctx.deterministic = deterministic();
  ctx.base_dir = options.base_dir;
  const Registry& reg = registry();
  static const nlohmann::json kNoStages = nlohmann::json::array();
  const nlohmann::json& stages_json =
      canonical.contains("stages") ? canonical.at("stages") : kNoStages;

  ctx.canonical = &canonical;
  ctx.source_fingerprint = source_fingerprint_;
  DatasetPtr ds = source_dataset_;
  if (!ds) {
    SpecObject src(canonical.at("source"), "$.source");
    std::string kind = src.get_string("kind");
    auto sb = reg.sources.find(kind);
    if (sb == reg.sources.end())
      throw_spec_error(src.field_path("kind"), unknown_name("source kind", kind, reg.sources));
    ctx.node_index = 0;
    ds = sb->second(src, ctx);
    src.finish();
  }
  attach(ds, label_prefix, 0, nodes);

  // An elastic pipeline: the stages before the batch are one lane's, over a lane source,
  // rewritten for lanes; the batch and what follows it are the merge.
  std::optional<elastic_build::Lanes> lanes;
  if (elastic_build::first_is_elastic(stages_json))
    lanes = elastic_build::plan_lanes(canonical, ds, reg, ctx);
  if (lanes) lanes->merge.place_rows = options.map_and_batch_fusion;
  const nlohmann::json& stages = lanes ? lanes->stages : stages_json;
  KnownSize known;  // the elements' least size, where the spec fixes it
  for (size_t i = 0; i < stages.size(); ++i) {
    if (lanes && (i == 0 || i == lanes->batch)) {
      const int64_t index = static_cast<int64_t>(i) + 1;
      ctx.node_index = index;
      ds = i == 0 ? make_lane_source(ds, lanes->plan) : elastic_build::merge_over(*lanes, ds, ctx);
      attach(ds, label_prefix, index, nodes);
      if (i == 0) continue;
      break;
    }
    const DatasetPtr in = ds;
    SpecObject st(stages[i], "$.stages[" + std::to_string(i) + "]");
    std::string op = st.get_string("op");
    auto b = reg.stages.find(op);
    if (b == reg.stages.end())
      throw_spec_error(st.field_path("op"), unknown_name("op", op, reg.stages));
    ctx.node_index = static_cast<int64_t>(i) + 1;
    try {
      ds = b->second(st, ds, ctx);
    } catch (const Error& e) {
      if (e.stage() == "spec") throw;
      throw_spec_error(st.path(), e.what());
    }
    st.finish();
    // Rewrites: a batch right after an ordered map becomes the fused batch node.
    if (options.map_and_batch_fusion && op == "batch") ds = fuse_map_and_batch(ds);
    attach(ds, label_prefix, ctx.node_index, nodes);
    arm_memory_watch(stages[i], in, ds, options.memory_check, known);
  }
  return ds;
}

std::unique_ptr<Pipeline> PipelineDef::build(const BuildOptions& given) const {
  std::vector<DatasetPtr> nodes;
  const nlohmann::json canonical = canonical_json();
  BuildOptions options = given;
  if (memory_check_.share) options.memory_check.share = memory_check_.share;
  if (memory_check_.limit_mb) options.memory_check.limit_mb = memory_check_.limit_mb;
  if (memory_check_.action) options.memory_check.action = memory_check_.action;
  DatasetPtr ds = build_nodes(options, "", nodes, canonical);
  // The state fingerprint: a fixed hash (64-bit FNV-1a) of the canonical JSON, which does
  // not depend on the compiler's std::hash; beside it the first format's (std::hash of
  // the same JSON), so that states saved before the change still restore.
  const std::string fingerprint = this->fingerprint();
  const std::string v1 =
      source_dataset_ ? fingerprint
                      : std::to_string(std::hash<std::string>{}(fingerprinted(canonical).dump()));
  TunerOptions tuning = options.tuning;
  if (autotune_.cpu_budget) tuning.cpu_budget = *autotune_.cpu_budget;
  if (autotune_.ram_budget_mb)
    tuning.ram_budget_bytes = static_cast<int64_t>(*autotune_.ram_budget_mb * 1048576.0);
  tuning.remember = tuning.remember && autotune_.remember;
  if (tuning.remember && tuning.memory_key.empty()) tuning.memory_key = tuner_memory_key(canonical);
  return std::make_unique<Pipeline>(ds, std::move(nodes), fingerprint, v1, tuning);
}

namespace {
// Every "seed" at any depth, out.
void drop_seeds(nlohmann::json& j) {
  if (j.is_object()) {
    j.erase("seed");
    for (auto it = j.begin(); it != j.end(); ++it) drop_seeds(it.value());
  } else if (j.is_array()) {
    for (auto& v : j) drop_seeds(v);
  }
}
}  // namespace

std::string PipelineDef::tuner_memory_key() const { return tuner_memory_key(canonical_json()); }

std::string PipelineDef::fingerprint() const {
  const nlohmann::json canonical = canonical_json();
  if (source_dataset_) return source_fingerprint_ + ":" + canonical.at("stages").dump();
  return spec_fingerprint(fingerprinted(canonical).dump());
}

std::string PipelineDef::tuner_memory_key(const nlohmann::json& canonical) const {
  nlohmann::json j = canonical;  // already without "autotune"
  j.erase("name");
  j.erase("comment");
  drop_seeds(j);
  const std::string text = (source_dataset_ ? source_fingerprint_ + ":" : "") + j.dump();
  return "tuner:" + spec_fingerprint(text);
}

std::string spec_fingerprint(const std::string& canonical_text) {
  char hex[40];
  std::snprintf(hex, sizeof hex, "fnv1a64:%016llx",
                static_cast<unsigned long long>(fnv1a64(canonical_text)));
  return hex;
}

bool operator==(const PipelineDef& a, const PipelineDef& b) {
  return a.seed_ == b.seed_ && a.deterministic_ == b.deterministic_ && a.autotune_ == b.autotune_ &&
         a.memory_check_ == b.memory_check_ && a.has_stages_ == b.has_stages_ &&
         a.source_kind_ == b.source_kind_ && a.source_options_ == b.source_options_ &&
         a.source_dataset_ == b.source_dataset_ && a.source_fingerprint_ == b.source_fingerprint_ &&
         a.stages_ == b.stages_ && a.extra_ == b.extra_;
}

namespace {
PipelineDef file_source(const char* kind, std::vector<std::string> uris, nlohmann::json options) {
  return PipelineDef(
      kind, with_field(options.is_null() ? nlohmann::json::object() : options, "uri", uris));
}
}  // namespace

PipelineDef range(int64_t count, nlohmann::json options) {
  return PipelineDef(
      "range", with_field(options.is_null() ? nlohmann::json::object() : options, "count", count));
}
PipelineDef tfrecord(std::vector<std::string> uris, nlohmann::json options) {
  return file_source("tfrecord", std::move(uris), std::move(options));
}
PipelineDef tar(std::vector<std::string> uris, nlohmann::json options) {
  return file_source("tar", std::move(uris), std::move(options));
}
PipelineDef text(std::vector<std::string> uris, nlohmann::json options) {
  return file_source("text", std::move(uris), std::move(options));
}
PipelineDef idx(std::string images, std::string labels, nlohmann::json options) {
  nlohmann::json o = with_field(options.is_null() ? nlohmann::json::object() : options, "images",
                                std::move(images));
  if (!labels.empty()) o["labels"] = std::move(labels);
  return PipelineDef("idx", std::move(o));
}

PipelineDef files(nlohmann::json options) { return PipelineDef("files", std::move(options)); }
PipelineDef sample(const std::vector<PipelineDef>& inputs, std::vector<double> weights,
                   nlohmann::json options) {
  nlohmann::json o = options.is_null() ? nlohmann::json::object() : std::move(options);
  o["inputs"] = nlohmann::json::array();
  for (const auto& in : inputs) o["inputs"].push_back(in.to_json());
  if (!weights.empty()) o["weights"] = weights;
  return PipelineDef("sample", std::move(o));
}

}  // namespace dataecho
