// PipelineDef: a pipeline as a value (seed, source, stages), made in C++ with a fluent
// builder or parsed from the JSON spec (README.md, "A pipeline in one JSON document"),
// written back to JSON, and built into a running Pipeline. Everything that makes
// pipelines goes through build():
// the JSON path, the experiment runner, the trainer's in-memory pipelines and the tests.
//
//   auto p = dataecho::range(1000)
//                .map("augment", {{"flip", true}}, {.parallelism = 2})
//                .echo({.factor = 2.5})
//                .shuffle({.buffer = 1000})
//                .batch({.size = 128})
//                .build();
//
// Design: a stage holds its op and its options as the spec writes them. The typed
// option structs (spec/stage_options.h) are the C++ front end; they write those options, and
// build() hands them to the op's builder in the registry, which reads every option by the op's
// declaration (spec/schema.h: type, default, bounds) whichever way the definition was
// made; a test holds each struct to its op's declaration. An error names the option by
// its JSON path ($.stages[2].size), also for a definition made in C++ (the path its
// to_json() gives it).
// Thread-safety: a value type; build() may run on several threads at once.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/dataset.h"
#include "dataecho/core/pipeline.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/stage_options.h"

namespace dataecho {

// One stage: its op and its options ({"buffer": 1000} for a shuffle: every field of its
// JSON object but "op").
struct StageDef {
  std::string op;
  nlohmann::json options = nlohmann::json::object();
  nlohmann::json to_json() const;  // {"op": ..., options...}
  // For a map or filter: the function's name ("" otherwise or when not given).
  std::string fn() const;
  // An option as a typed value: nullopt when it is not given or is not a T (a
  // "parallelism" of "auto" is no int64_t). T: bool, an integer, a floating-point type
  // or std::string.
  template <class T>
  std::optional<T> option(const std::string& key) const;
  friend bool operator==(const StageDef&, const StageDef&) = default;
};

template <class T>
std::optional<T> StageDef::option(const std::string& key) const {
  if (!options.is_object()) return std::nullopt;
  const auto it = options.find(key);
  if (it == options.end()) return std::nullopt;
  const nlohmann::json& v = *it;
  bool fits = false;
  if constexpr (std::is_same_v<T, bool>) {
    fits = v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    fits = v.is_number_integer();
  } else if constexpr (std::is_floating_point_v<T>) {
    fits = v.is_number();
  } else {
    static_assert(std::is_same_v<T, std::string>, "StageDef::option: bool, number or string");
    fits = v.is_string();
  }
  if (!fits) return std::nullopt;
  return v.get<T>();
}

// A parallelism or buffer the pipeline's tuner sets while it runs ("auto" in the spec;
// core/tuner.h): map's parallelism, interleave's parallelism and prefetch's buffer. (An
// echo's tuned cap is EchoStageOptions::autotune.)
inline constexpr int kAutotune = -1;

// The typed options of the fluent builder (MapStageOptions, ShuffleStageOptions, ...) are
// in spec/stage_options.h, written from the operators' declarations.

// The tuner's budgets (the spec's "autotune" object); unset: $DATAECHO_CPU_BUDGET or all
// cores, $DATAECHO_RAM_BUDGET_MB or 1/8 of physical memory.
struct AutotuneOptions {
  std::optional<double> cpu_budget = std::nullopt;     // cores
  std::optional<double> ram_budget_mb = std::nullopt;  // MiB
  // A pipeline's tuner starts from what the last tuner of the same definition (without
  // seeds and budgets) chose in this process, and stores what it chooses
  // (core/tuner_memory.h); false: it starts from the spec's values every time.
  bool remember = true;
  friend bool operator==(const AutotuneOptions&, const AutotuneOptions&) = default;
};

class PipelineDef {
 public:
  PipelineDef() = default;
  // A source of a registered kind with its options ({"count": 10} for a range).
  PipelineDef(std::string kind, nlohmann::json options);
  // A source that exists already (in-memory data, a dataset made by hand). Such a
  // definition builds but has no JSON form; `fingerprint` stands for the source in the
  // pipeline's state fingerprint.
  static PipelineDef from_dataset(DatasetPtr source, std::string fingerprint);

  // ---- the fluent stages ----
  PipelineDef& map(std::string fn, nlohmann::json args = nlohmann::json::object(),
                   MapStageOptions options = {});
  PipelineDef& filter(std::string fn, nlohmann::json args = nlohmann::json::object());
  PipelineDef& interleave(InterleaveStageOptions options = {});
  PipelineDef& shuffle(ShuffleStageOptions options);
  PipelineDef& echo(EchoStageOptions options);
  PipelineDef& batch(BatchStageOptions options);
  PipelineDef& padded_batch(PaddedBatchStageOptions options);
  PipelineDef& unbatch();
  PipelineDef& pack(PackStageOptions options);
  PipelineDef& bucket(BucketStageOptions options);
  PipelineDef& prefetch(int64_t buffer = 2);  // or kAutotune
  PipelineDef& cache(CacheStageOptions options = {});
  PipelineDef& repeat(int64_t count = -1);
  PipelineDef& take(int64_t count);
  PipelineDef& skip(int64_t count);
  PipelineDef& shard(int64_t num_shards, int64_t index);
  // Any registered op, by its JSON options (for ops of one's own).
  PipelineDef& stage(std::string op, nlohmann::json options = nlohmann::json::object());
  // A stage of a declared op (spec/schema.h) from its options as given (null: not given),
  // written as the typed methods above write it: an option given at its default is left
  // out where its declaration says so (Written), an integral number given as 2.0 is
  // written 2. Each option's type is checked now, its bounds when the pipeline is built;
  // an error names the option's JSON path ($.stages[3].factor). The Python package's
  // stage methods make their stages with it.
  PipelineDef& declared_stage(const std::string& op, const nlohmann::json& options);
  PipelineDef& seed(uint64_t seed);
  PipelineDef& deterministic(bool on);
  PipelineDef& autotune(AutotuneOptions options);
  // The check of the buffers against the machine's memory (core/memory_watch.h; the
  // spec's "memory_check"): {.share = 0.25}, {.limit_mb = 512}, {.action = "error"}.
  PipelineDef& memory_check(MemoryCheckOptions options);

  // ---- reading and editing (the typed transformations of the experiment runner) ----
  uint64_t seed() const { return seed_.value_or(0); }
  bool deterministic() const { return deterministic_.value_or(true); }
  const AutotuneOptions& autotune() const { return autotune_; }
  const MemoryCheckOptions& memory_check() const { return memory_check_; }
  const std::string& source_kind() const { return source_kind_; }
  const nlohmann::json& source_options() const { return source_options_; }
  const std::vector<StageDef>& stages() const { return stages_; }
  std::vector<StageDef>& mutable_stages() { return stages_; }
  // The first stage at or after `from` with this op (and, when given, this function).
  std::optional<size_t> find(const std::string& op, const std::string& fn = "",
                             size_t from = 0) const;
  void insert(size_t at, std::vector<StageDef> stages);
  // How many stages have this op.
  size_t count(const std::string& op) const;
  // Whether the definition lists stages (a spec's "stages", possibly empty, or a stage
  // added in C++): a spec of a source alone has none.
  bool lists_stages() const { return has_stages_ || !stages_.empty(); }
  // Option `key` of stage `index` as a typed value (StageDef::option); throws, naming the
  // stage's path, when there is no such stage.
  template <class T>
  std::optional<T> option(size_t index, const std::string& key) const {
    return stage_at(index).option<T>(key);
  }

  // ---- edits with value semantics: each returns the edited definition and leaves this
  // one as it was. Where an edit cannot apply it throws dataecho::Error
  // (kInvalidArgument, stage "spec") whose message names the stage by its JSON path
  // ("$.stages[2] (shard): ..."). An edited definition is a definition like any other:
  // its to_json() is the spec a person would write for it, and it builds as that spec.
  // ----
  // A `shard` stage put first (index `index` of `num_shards` shares): one rank's share of
  // the data in data-parallel training. Refused when the pipeline has a shard stage
  // already, which would shard the shares again.
  PipelineDef with_shard_first(int64_t num_shards, int64_t index) const;
  // An `elastic` stage put first (ops/elastic.h): the data split into `lanes` lanes, of
  // which rank `rank` of `world_size` reads its own, and the batch's size the global
  // batch; a state of its pipeline restores on any world size that divides `lanes`.
  // Refused when the pipeline has an elastic or a shard stage already.
  PipelineDef with_elastic_first(int64_t lanes, int64_t world_size, int64_t rank) const;
  // The pipeline seed mixed with each salt in turn (core/rng.h mix_seed, from seed()),
  // then halved into [0, 2^63) so that it is a valid spec "seed": a run's seed, a rank.
  PipelineDef with_mixed_seed(std::initializer_list<uint64_t> salts) const;
  // Without the stages of this op (the same definition when it has none).
  PipelineDef without(const std::string& op) const;
  // Each stage of this op replaced by `stages`, in place (none: removed).
  PipelineDef replacing(const std::string& op, const std::vector<StageDef>& stages) const;
  // `stages` inserted before stage `at` (at == stages().size(): at the end), and after
  // stage `index`.
  PipelineDef inserting(size_t at, std::vector<StageDef> stages) const;
  PipelineDef inserting_after(size_t index, std::vector<StageDef> stages) const;
  // Stage `index` with option `key` set to `value` (a bool, number or string); build()
  // validates it as every option.
  template <class T>
  PipelineDef with_option(size_t index, const std::string& key, const T& value) const {
    return with_option_json(index, key, nlohmann::json(value));
  }
  // The source's option `key` set to `value` (a service source's "epoch"); build()
  // validates it as every option. Refused for a definition without a source kind.
  PipelineDef with_source_option(const std::string& key, nlohmann::json value) const;

  // ---- JSON ----
  // Checks the structure (a source with a kind, a list of stages each with an op);
  // each op's options are checked by build(). Errors name the JSON path.
  static PipelineDef from_json(const nlohmann::json& spec);
  // A list of stages as a spec's "stages" ([{"op": "batch", "size": 4}, ...]), checked as
  // from_json checks it (errors name $.stages[i]).
  static std::vector<StageDef> stages_from_json(const nlohmann::json& stages);
  // The spec: from_json(d.to_json()) == d, and to_json(from_json(j)) == j for a valid
  // spec j ("name" and "comment" are kept). Throws for a definition made from_dataset.
  nlohmann::json to_json() const;
  // The "stages" list of to_json() (also for a definition made from_dataset).
  nlohmann::json stages_to_json() const;

  // Validates every option, builds the nodes, labels them ("3:shuffle"), attaches their
  // stats and wraps a builder's error with the stage's JSON path. The state fingerprint
  // is a hash of the canonical JSON (the same as before PipelineDef existed).
  std::unique_ptr<Pipeline> build(const BuildOptions& options = {}) const;
  // The key of this definition's entry in the process's TunerMemory
  // (core/tuner_memory.h): a hash of the canonical JSON without the seeds (every "seed"
  // at any depth), the budgets ("autotune"), "name" and "comment", none of which changes
  // what a stage costs. build() gives it to the pipeline's tuner.
  std::string tuner_memory_key() const;
  // The state fingerprint build() gives this definition's pipeline: a hash of the
  // canonical JSON without what says where the pipeline runs (an elastic stage's world
  // size and rank; a service source's dispatcher address, token file, timeout and
  // buffer), so that a state restores after they change.
  std::string fingerprint() const;
  // The nodes alone, without a Pipeline around them (the inputs of a `sample` source):
  // labeled label_prefix + "3:shuffle", appended to `nodes`, source first; returns the
  // last.
  DatasetPtr build_nodes(const BuildOptions& options, const std::string& label_prefix,
                         std::vector<DatasetPtr>& nodes) const;

  friend bool operator==(const PipelineDef& a, const PipelineDef& b);

 private:
  const StageDef& stage_at(size_t index) const;  // throws naming the path
  nlohmann::json canonical_json() const;         // what build() reads and fingerprints
  // build_nodes from the canonical JSON already made (build() also fingerprints it).
  DatasetPtr build_nodes(const BuildOptions& options, const std::string& label_prefix,
                         std::vector<DatasetPtr>& nodes, const nlohmann::json& canonical) const;
  PipelineDef with_option_json(size_t index, const std::string& key, nlohmann::json value) const;
  std::string tuner_memory_key(const nlohmann::json& canonical) const;

  // Unset: not given (the spec's default), so that to_json() gives back what was read.
  std::optional<uint64_t> seed_;
  std::optional<bool> deterministic_;
  AutotuneOptions autotune_;
  MemoryCheckOptions memory_check_;
  bool has_stages_ = false;  // a "stages" list was given (possibly empty)
  std::string source_kind_;
  nlohmann::json source_options_ = nlohmann::json::object();
  DatasetPtr source_dataset_;  // from_dataset
  std::string source_fingerprint_;
  std::vector<StageDef> stages_;
  nlohmann::json extra_ = nlohmann::json::object();  // "name", "comment"
};

// The sources, by the names the spec uses.
PipelineDef range(int64_t count, nlohmann::json options = nlohmann::json::object());
PipelineDef tfrecord(std::vector<std::string> uris,
                     nlohmann::json options = nlohmann::json::object());
PipelineDef tar(std::vector<std::string> uris, nlohmann::json options = nlohmann::json::object());
// Lines or documents of text files, or JSON Lines (formats/text.h).
PipelineDef text(std::vector<std::string> uris, nlohmann::json options = nlohmann::json::object());
PipelineDef idx(std::string images, std::string labels = "",
                nlohmann::json options = nlohmann::json::object());
// The `files` source (formats/files.h): options as its JSON object, with one of "root"
// (an ImageFolder tree), "uri" (paths, globs) and "list" (a CSV or TSV file):
//   dataecho::files({{"root", "/data/train"}, {"reads_in_flight", 16}})
PipelineDef files(nlohmann::json options);
// The `sample` source (ops/sample.h): `inputs` mixed by `weights` (empty: equal);
// options: "stop" ("first", "all", "never"), "seed".
PipelineDef sample(const std::vector<PipelineDef>& inputs, std::vector<double> weights = {},
                   nlohmann::json options = nlohmann::json::object());

// The `service` source's options (docs/service.md): where the dispatcher is, the job's
// name, and how the trainer reads. The token comes from `token_file` or
// $DATAECHO_SERVICE_TOKEN, never from the spec.
struct ServiceOptions {
  std::string dispatcher = "";  // host:port
  std::string job = "";
  // "off" (each worker's own passes), "dynamic" (each element once an epoch, in the
  // order the workers deliver) or "static" (the same, and each consumer's elements in one
  // order on every run and resume, whichever workers compute them)
  std::string sharding = "off";
  int64_t epoch = 0;             // the job's epoch of the first pass (a repeat reads the next)
  int64_t buffer_mb = 64;        // elements read ahead from all workers together
  std::string token_file = "";
  double connect_timeout_s = 30;
  std::string ca_file = "";          // TLS: the CA(s) of the servers' certificates ("": plaintext)
  std::string ca_path = "";          // TLS: a folder of them
  std::string tls_server_name = "";  // TLS: the name the certificates carry ("": the host)
};
// The `service` source: `upstream` runs on the data service's workers, and the pipeline
// reads what they stream (src/spec/service_builders.cc). (The namespace
// dataecho::service, the service layer's, takes the source's own name.)
PipelineDef service_source(const PipelineDef& upstream, ServiceOptions options);

}  // namespace dataecho
