// The training loop of the paper's protocol: pull a batch (time blocked = wait), train
// on it (time = compute), count fresh and echoed rows, evaluate every N steps, stop at
// the target or when a budget runs out, checkpoint so that --resume continues exactly.
// Why this file is long: TrainRun is one run's state (counts, clocks, model, pipelines,
// held-out sets) with its phases, which all read and write that state; apart, they would
// hand it around. What is not the run lives elsewhere: its files and the checkpoint's
// publishing (run_io.h), its records as JSON (train_result.cc).
#include "dataecho/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "dataecho/core/clock.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/core/process_memory.h"
#include "dataecho/core/redact.h"
#include "dataecho/core/rng.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/spec/build.h"
#include "dataecho/train/distributed.h"
#include "dataecho/train/model.h"
#include "dataecho/train/optimizer.h"
#include "dataecho/train/torch_batch.h"
#include "progress.h"
#include "run_io.h"
#include "task.h"

namespace dataecho::train {
namespace fs = std::filesystem;
using run_io::load_model_bytes;
using run_io::load_read_set;
using run_io::model_bytes;
using run_io::opt_json;
using run_io::read_file;
using run_io::ReadKey;
using run_io::ReadSet;
using run_io::save_read_set;
using run_io::write_file;

namespace {

constexpr const char* kStage = "train";

[[noreturn]] void fail(ErrorCode code, const std::string& message, const std::string& input = "") {
  throw Error(code, kStage, message, input);
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T>
std::optional<T> json_opt(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

// A pipeline whose source is a data service's (docs/service.md): the service shares the
// data between the ranks, each rank a consumer of the job (`consumers` = world,
// `consumer` = rank) reading its own lanes. The upstream, run by the workers, takes the
// run's seed without the rank's salt (every rank names the same job); the stages after
// the source are salted per rank as with file sharding.
PipelineDef with_service_rank(const PipelineDef& def, std::optional<uint64_t> seed, int rank,
                              int world, int64_t elastic_lanes) {
  if (elastic_lanes > 0)
    fail(ErrorCode::kInvalidArgument,
         "training pipeline: its source is a data service's, which shares the data between "
         "ranks itself (each rank a consumer of the job): leave --sharding at files");
  nlohmann::json j = def.to_json();
  nlohmann::json& source = j["source"];
  if (seed && *seed != 0 && source.contains("pipeline"))
    source["pipeline"] =
        PipelineDef::from_json(source["pipeline"]).with_mixed_seed({*seed}).to_json();
  source["consumers"] = world;
  source["consumer"] = rank;
  PipelineDef d = PipelineDef::from_json(j);
  if (seed && *seed != 0)
    d = rank > 0 ? d.with_mixed_seed({*seed, static_cast<uint64_t>(rank)})
                 : d.with_mixed_seed({*seed});
  return d;
}

bool is_service_source(const PipelineDef& def) {
  const nlohmann::json j = def.to_json();
  return j.contains("source") && j["source"].value("kind", "") == "service";
}

// `rank` of `world` > 1, file sharding: this rank's share of the data, by a `shard` stage
// put first (whole files when there are at least as many files as ranks, otherwise every
// world-th element; make_shard decides), and a pipeline seed of its own, so that ranks do
// not draw the same augmentations. Rank 0 keeps the one-process seed.
// `elastic_lanes` > 0, elastic sharding (at any world size, 1 included, so that the
// stages' seeds do not move with it): the same seed on every rank, and an elastic stage
// of that many lanes first, of which this rank reads its own.
std::unique_ptr<Pipeline> make_pipeline(const PipelineFactory& factory,
                                        const std::optional<PipelineDef>& spec,
                                        const std::string& dir, std::optional<uint64_t> seed,
                                        int rank = 0, int world = 1, int64_t elastic_lanes = 0) {
  if (factory) return factory();
  if (!spec) fail(ErrorCode::kInvalidArgument, "no pipeline: give a spec or a factory");
  PipelineDef def = *spec;
  if ((world > 1 || elastic_lanes > 0) && def.find("shard"))
    fail(ErrorCode::kInvalidArgument,
         "training pipeline: has a \"shard\" stage, but data-parallel training shares the data "
         "between ranks itself (a shard or elastic stage first); remove it from the spec");
  if (is_service_source(def)) {
    def = with_service_rank(def, seed, rank, world, elastic_lanes);
  } else if (elastic_lanes > 0) {
    if (seed && *seed != 0)
      def = def.with_mixed_seed({*seed});
    else if (!def.to_json().contains("seed"))
      fail(ErrorCode::kInvalidArgument,
           "training pipeline: elastic sharding needs a pipeline seed, the same on every rank "
           "(every rank draws the global order and the augmentations from it): give the spec "
           "a \"seed\", or the run a --seed other than 0");
    def = def.with_elastic_first(elastic_lanes, world, rank);
  } else {
    if (seed && *seed != 0)
      def = rank > 0 ? def.with_mixed_seed({*seed, static_cast<uint64_t>(rank)})
                     : def.with_mixed_seed({*seed});
    if (world > 1) def = def.with_shard_first(world, rank);
  }
  BuildOptions o;
  o.base_dir = dir;
  return def.build(o);
}

// " (source: ...)" naming the spec's source files, for an error about the pipeline's data.
std::string source_of(const std::optional<PipelineDef>& spec) {
  if (!spec) return "";
  const nlohmann::json j = spec->to_json();
  if (!j.contains("source") || !j["source"].contains("uri")) return "";
  return " (source: " + j["source"]["uri"].dump() + ")";
}

// The global batch of an elastic pipeline: its (first) batch stage's size.
int64_t global_batch_of(const PipelineDef& spec) {
  const std::optional<size_t> at = spec.find("batch");
  return at ? spec.option<int64_t>(*at, "size").value_or(0) : 0;
}

// Elements the pipeline's source has produced so far (read-ahead included).
int64_t source_reads(const Pipeline& p) {
  PipelineStats st = p.stats();
  return st.nodes().empty() ? 0 : st.nodes().front()->rows.load();
}

}  // namespace

struct Trainer::State {
  Classifier model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

Trainer::Trainer(TrainConfig config)
    : config_(std::move(config)), state_(std::make_unique<State>()) {}
Trainer::~Trainer() = default;

std::shared_ptr<ClassifierImpl> Trainer::model() const { return state_->model; }

namespace {

// VmHWM in MiB, if /proc/self/status has it.
std::optional<double> peak_rss_mib() {
  const int64_t kib = process_status_kib("VmHWM:");
  if (kib < 0) return std::nullopt;
  return static_cast<double>(kib) / 1024.0;
}

// An evaluation (or test) set, loaded into memory before the training clock starts.
struct HeldOut {
  std::vector<TorchBatch> batches;
  std::optional<InputSignature> sig;
  int64_t examples = 0;
};

// TrainConfig::cpu_split for one run: this thread (the train step, and LibTorch's
// threads it starts) on the first N CPUs, the engine's threads started from now on
// (the run builds its pipelines after this) on the rest; both undone at the end.
class CpuSplit {
 public:
  explicit CpuSplit(int n) {
    if (n == 0) return;
    before_ = allowed_cpus();
    std::tie(train, pipeline) = split_cpus(before_, n);
    if (!pin_current_thread(train))
      throw_error(ErrorCode::kInternal, "cpu split",
                  "sched_setaffinity refused the train step's CPUs");
    set_engine_cpus(pipeline);
  }
  ~CpuSplit() {
    if (before_.empty()) return;
    set_engine_cpus({});
    pin_current_thread(before_);
  }
  CpuSplit(const CpuSplit&) = delete;
  CpuSplit& operator=(const CpuSplit&) = delete;
  std::vector<int> train, pipeline;

 private:
  std::vector<int> before_;
};

// One run of Trainer::run(), in named phases: prepare (everything that can be refused,
// before the first step), the loop (step, evaluate, checkpoint, report), and finish
// (snapshot evaluation, test set, summary).
class TrainRun {
 public:
  TrainRun(const TrainConfig& c, const std::atomic<bool>& stop, Classifier& model_out)
      : c_(c),
        stop_(stop),
        model_out_(model_out),
        decay_steps_(c.optimizer.decay_steps > 0 ? c.optimizer.decay_steps : c.max_steps),
        has_eval_(static_cast<bool>(c.eval_pipeline) || c.eval_spec.has_value()),
        has_test_(static_cast<bool>(c.test_pipeline) || c.test_spec.has_value()),
        snapshots_mode_(c.eval_mode == "snapshots"),
        task_(make_task(c)),
        dist_(c.collective.get()),
        rank_(dist_ ? dist_->rank() : 0),
        world_(dist_ ? dist_->world_size() : 1),
        lead_(rank_ == 0),
        elastic_(c.sharding == "elastic"),
        out_(c.out),
        ckpt_dir_(out_ / "checkpoint"),
        snap_dir_(out_ / "snapshots"),
        progress_(lead_ ? c.progress : "off", c.progress_seconds) {}

  TrainResult run() {
    CpuSplit split(c_.cpu_split);  // before the pipelines' threads start
    r_.train_cpus = split.train;
    r_.pipeline_cpus = split.pipeline;
    cpu_start_ns_ = process_cpu_ns();
    check_elastic_world();
    read_checkpoint_state();
    load_held_out_sets();
    start_training_pipeline();
    build_model();
    if (c_.resume) restore_checkpoint();
    train_s_ += startup_s_;  // start-up and filling the buffers are training-side time
    if (!r_.evals.empty()) r_.final_eval = r_.evals.back();
    open_outputs();
    loop();
    if (has_eval_ && c_.eval_at_end && last_eval_step_ != step_ && r_.stop_reason != "diverged")
      evaluation_point();
    checkpoint(pipeline_untouched_);
    const double train_wall = wall_now();
    r_.cpu_seconds = (process_cpu_ns() - cpu_start_ns_) / 1e9;
    evaluate_after_training();
    report(last_loss_, true);
    progress_.finish();
    summarize(train_wall);
    return std::move(r_);
  }

 private:
  // ---- prepare: everything that can be refused is checked before the first step ----

  // On --resume: the checkpoint's state.json, for a model like this config's.
  void read_checkpoint_state() {
    model_json_ = train_config_to_json(c_)["model"];
    if (!c_.resume) return;
    // A checkpoint interrupted between its two renames is still whole as checkpoint.old.
    if (lead_ && !fs::exists(ckpt_dir_) && fs::exists(out_ / "checkpoint.old") &&
        fs::exists(out_ / "checkpoint.old" / "state.json"))
      fs::rename(out_ / "checkpoint.old", ckpt_dir_);
    if (!shared_exists(ckpt_dir_ / "state.json")) {
      fail(ErrorCode::kNotFound, "--resume: no checkpoint to resume from",
           (ckpt_dir_ / "state.json").string());
    }
    ckpt_ = nlohmann::json::parse(shared_read(ckpt_dir_ / "state.json"));
    check_checkpoint_sharding();
    if (ckpt_.at("model") != model_json_) {
      fail(ErrorCode::kInvalidArgument,
           "--resume: the checkpoint was made with model " + ckpt_.at("model").dump() + ", not " +
               model_json_.dump(),
           ckpt_dir_.string());
    }
  }

  // Elastic sharding: this job's world size divides the lanes.
  void check_elastic_world() {
    if (!elastic_) return;
    try {
      elastic_lanes_of(c_.lanes, world_, rank_);
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidArgument, "--sharding elastic: " + e.message());
    }
  }

  // The checkpoint's sharding against this job's: file sharding resumes on the same world
  // size; elastic sharding on any that divides the lanes, which must be the checkpoint's.
  void check_checkpoint_sharding() {
    const std::string saved = ckpt_.value("sharding", std::string("files"));
    if (saved != c_.sharding)
      fail(ErrorCode::kInvalidArgument,
           "--resume: the checkpoint was written with sharding \"" + saved +
               "\" and this job has sharding \"" + c_.sharding + "\": resume with --sharding " +
               saved +
               " (file sharding saves each rank's own pipeline state, elastic sharding "
               "the state of every lane of one global order)",
           ckpt_dir_.string());
    if (elastic_) {
      const int64_t lanes = ckpt_.value("lanes", int64_t{0});
      if (lanes != c_.lanes)
        fail(ErrorCode::kInvalidArgument,
             "--resume: the checkpoint has " + std::to_string(lanes) + " lanes and this job " +
                 std::to_string(c_.lanes) + ": resume with --lanes " + std::to_string(lanes),
             ckpt_dir_.string());
      return;
    }
    const int64_t saved_world = ckpt_.value("world_size", int64_t{1});
    if (saved_world != world_) {
      fail(ErrorCode::kInvalidArgument,
           "--resume: the checkpoint was written by " + std::to_string(saved_world) +
               (saved_world == 1 ? " rank" : " ranks") + " and this job has " +
               std::to_string(world_) +
               "; resume with the same world size (a checkpoint holds each rank's pipeline "
               "state, and is not re-sharded; elastic sharding resumes on another world size)",
           ckpt_dir_.string());
    }
  }

  HeldOut load_held_out(const PipelineFactory& factory, const std::optional<PipelineDef>& spec,
                        const std::string& dir, const std::string& what) {
    HeldOut h;
    std::unique_ptr<Pipeline> p = make_pipeline(factory, spec, dir, std::nullopt);
    while (auto b = p->next()) {
      InputSignature es = task_->inspect(*b, what);
      if (h.sig && !es.same_as(*h.sig))
        fail(ErrorCode::kInvalidArgument,
             what + ": its batches are " + es.describe() + " and " + h.sig->describe());
      h.sig = es;
      TorchBatch tb = task_->to_torch(*b, es);
      task_->check(tb, what);
      h.examples += tb.rows;
      h.batches.push_back(std::move(tb));
    }
    if (h.examples == 0)
      fail(ErrorCode::kInvalidArgument, what + ": yielded no batch" + source_of(spec));
    return h;
  }

  // The evaluation (and test) sets are loaded before the training pipeline is built: the
  // training clock starts with that build, and its pipeline must not read ahead meanwhile.
  void load_held_out_sets() {
    if (!lead_) return;  // rank 0 evaluates and shares the result
    try {
      if (has_eval_)
        eval_data_ =
            load_held_out(c_.eval_pipeline, c_.eval_spec, c_.eval_spec_dir, "evaluation pipeline");
      if (has_test_)
        test_data_ =
            load_held_out(c_.test_pipeline, c_.test_spec, c_.test_spec_dir, "test pipeline");
    } catch (const Error&) {
      // A mistake that the training pipeline shares (a wrong field name) is reported for
      // the training pipeline, as a user reads the config: check its first batch first.
      std::unique_ptr<Pipeline> t =
          make_pipeline(c_.train_pipeline, c_.train_spec, c_.train_spec_dir, std::nullopt);
      if (auto b = t->next()) task_->inspect(*b, "training pipeline");
      throw;
    }
  }

  // Starts the training clock, builds the pipeline (restored on --resume) and peeks at its
  // first batch, whose shape the held-out sets must share.
  void start_training_pipeline() {
    clock_start_ = now_ns();
    train_ = make_pipeline(c_.train_pipeline, c_.train_spec, c_.train_spec_dir,
                           c_.seed_pipeline ? std::optional<uint64_t>(c_.seed) : std::nullopt,
                           rank_, world_, elastic_ ? c_.lanes : 0);
    if (elastic_) global_batch_ = global_batch_of(*c_.train_spec);
    if (c_.resume && ckpt_.value("pipeline_ended", false))
      fail(ErrorCode::kInvalidArgument,
           "training pipeline: nothing left after the checkpoint (it was written at the end of "
           "the data)" +
               source_of(c_.train_spec));
    if (c_.resume) train_->restore(own_read("pipeline", ".state"));
    initial_pipeline_state_ = out_.empty() ? std::string() : train_->save();
    pending_ = train_->next();
    if (!pending_) {
      fail(ErrorCode::kInvalidArgument,
           (c_.resume ? "training pipeline: nothing left after the checkpoint"
                      : "training pipeline: yielded no batch") +
               source_of(c_.train_spec));
    }
    startup_s_ = (now_ns() - clock_start_) / 1e9;
    sig_ = task_->inspect(*pending_, "training pipeline");
    for (const auto& [held, what] :
         {std::pair{&eval_data_, "evaluation"}, std::pair{&test_data_, "test"}}) {
      if (held->sig && !held->sig->same_as(*sig_)) {
        fail(ErrorCode::kInvalidArgument,
             std::string(what) + " pipeline: its batches are " + held->sig->describe() +
                 " but the training pipeline's are " + sig_->describe() +
                 "; both specs must produce the same representation");
      }
    }
  }

  void build_model() {
    torch::manual_seed(c_.seed);
    model_ = task_->make_model(*sig_);
    if (dist_) dist_->broadcast_model(*model_);  // one starting point, whatever the seeds
    optimizer_ = make_optimizer(model_->parameters(), c_.optimizer);
    model_out_ = model_;
    r_.input = sig_->describe();
    r_.parameters = count_parameters(*model_);
    r_.eval_mode = c_.eval_mode;
    r_.startup_seconds = startup_s_;
    lr_ = learning_rate_at(c_.optimizer, 0, decay_steps_);
  }

  // The running counts and clocks a checkpoint saves and --resume restores, each named
  // once here: f(key, variable, required) (not required: absent from older checkpoints).
  template <class F>
  void checkpoint_fields(F&& f) {
    f("step", step_, true);
    f("fresh", fresh_, true);
    f("echoed", echoed_, true);
    f("fresh_by_echo_index", fresh_echo0_, false);
    f("batch_duplicates", batch_duplicates_, false);
    f("train_seconds", train_s_, true);
    f("wait_seconds", wait_s_, true);
    f("compute_seconds", compute_s_, true);
    f("eval_seconds", eval_s_, true);
    f("snapshot_seconds", snap_s_, false);
    f("loss_sum", loss_sum_, true);
    f("loss_count", loss_count_, true);
    f("last_eval_step", last_eval_step_, true);
    f("lr", lr_, true);
    f("reached_target", r_.reached_target, true);
    f("steps_to_target", r_.steps_to_target, false);
    f("fresh_to_target", r_.fresh_to_target, false);
    f("raw_reads_to_target", r_.raw_reads_to_target, false);
    f("seconds_to_target", r_.seconds_to_target, false);
    f("wall_seconds_to_target", r_.wall_seconds_to_target, false);
  }

  void restore_checkpoint() {
    load_model_bytes(*model_, shared_read(ckpt_dir_ / "model.pt"));
    torch::serialize::InputArchive oa;
    std::istringstream optimizer_bytes(shared_read(ckpt_dir_ / "optimizer.pt"));
    oa.load_from(optimizer_bytes);
    optimizer_->load(oa);
    checkpoint_fields([&](const char* key, auto& v, bool required) {
      using T = std::decay_t<decltype(v)>;
      if constexpr (is_optional<T>::value) {
        v = json_opt<typename T::value_type>(ckpt_, key);
      } else if (required || ckpt_.contains(key)) {
        v = ckpt_.at(key).get<T>();
      }
    });
    wall_base_ = ckpt_.at("wall_seconds").get<double>();
    for (const auto& e : ckpt_.at("evals")) r_.evals.push_back(EvalRecord::from_json(e));
    for (const auto& e : ckpt_.value("snapshots", nlohmann::json::array()))
      snaps_.push_back({EvalRecord::from_json(e), {}});
    std::string lb = shared_read(ckpt_dir_ / "losses.bin");
    r_.losses.resize(lb.size() / sizeof(float));
    std::memcpy(r_.losses.data(), lb.data(), r_.losses.size() * sizeof(float));
    if (shared_exists(ckpt_dir_ / rank_file("fresh_keys", ".bin", 0)))
      seen_ = load_read_set(own_read("fresh_keys", ".bin"));
    if (shared_exists(ckpt_dir_ / rank_file("copy_keys", ".bin", 0)))
      copies_ = load_read_set(own_read("copy_keys", ".bin"), /*copies=*/true);
  }

  // ---- data-parallel helpers: rank 0 reads the checkpoint and hands it on, so that the
  // ranks need not share a file system ----

  bool shared_exists(const fs::path& p) {
    std::string yes = lead_ && fs::exists(p) ? "1" : "0";
    if (dist_) dist_->broadcast(yes);
    return yes == "1";
  }
  std::string shared_read(const fs::path& p) {
    std::string bytes = lead_ ? read_file(p) : std::string();
    if (dist_) dist_->broadcast(bytes);
    return bytes;
  }
  // Whether the checkpoint has a file per rank: file sharding's data-parallel jobs.
  // Elastic sharding writes one of each, which every rank reads.
  bool per_rank_files() const { return dist_ && !elastic_; }
  // A per-rank checkpoint file: "pipeline.state" for one process, "pipeline-rank-R.state"
  // for rank R of a data-parallel job.
  std::string rank_file(const char* stem, const char* ext, int r) const {
    return per_rank_files() ? std::string(stem) + "-rank-" + std::to_string(r) + ext
                            : std::string(stem) + ext;
  }
  // This rank's per-rank file of the checkpoint (the one file, without per-rank files).
  std::string own_read(const char* stem, const char* ext) {
    if (!per_rank_files()) return shared_read(ckpt_dir_ / rank_file(stem, ext, 0));
    std::string mine;
    for (int r = 0; r < world_; ++r) {
      std::string bytes = shared_read(ckpt_dir_ / rank_file(stem, ext, r));
      if (r == rank_) mine = std::move(bytes);
    }
    return mine;
  }

  void open_outputs() {
    if (out_.empty() || !lead_) return;
    std::error_code ec;
    fs::create_directories(out_, ec);
    if (ec)
      fail(ErrorCode::kIo, "cannot create the output directory: " + ec.message(), out_.string());
    write_file(out_ / "config.json", redact_json_urls(train_config_to_json(c_)).dump(2) + "\n");
    if (snapshots_mode_) fs::create_directories(snap_dir_);
    // Rewritten from the checkpoint on resume: evaluations after it happen again.
    evals_file_.open(out_ / "evals.jsonl", std::ios::trunc);
    if (!evals_file_) fail(ErrorCode::kIo, "cannot write", (out_ / "evals.jsonl").string());
    for (const auto& e : r_.evals) evals_file_ << e.to_json().dump() << "\n";
    evals_file_.flush();
  }

  // ---- the loop ----

  // Why the loop stops before the next step ("" to go on).
  // Data-parallel: the counts are global and the same on every rank; an interrupt on any
  // rank and rank 0's clock are shared through the last step's gradient bucket, so that
  // every rank stops at the same step.
  const char* budget_spent() const {
    if (dist_ ? any_stop_ : stop_.load()) return "interrupted";
    if (c_.max_steps > 0 && step_ >= c_.max_steps) return "max_steps";
    if (c_.max_fresh > 0 && fresh_ >= c_.max_fresh) return "max_fresh";
    if (c_.max_seconds > 0 && (dist_ ? lead_time_up_ : train_s_ >= c_.max_seconds))
      return "max_seconds";
    return "";
  }

  void loop() {
    model_->train();
    bool done = c_.resume && r_.reached_target;
    r_.stop_reason = done ? "target" : "";
    last_loss_ = r_.losses.empty() ? 0.0f : r_.losses.back();
    while (!done) {
      const int64_t t0 = now_ns();
      if (const char* why = budget_spent(); *why) {
        r_.stop_reason = why;
        break;
      }
      std::optional<Example> batch;
      if (pending_) {
        batch = std::move(pending_);
        pending_.reset();
      } else {
        batch = train_->next();
      }
      pipeline_untouched_ = false;
      if ((dist_ || elastic_) && !step_is_whole(batch)) batch.reset();
      if (!batch) {
        r_.stop_reason = "end_of_data";
        break;
      }
      const int64_t new_fresh = step(*batch, t0);
      if (!std::isfinite(last_loss_)) {
        r_.stop_reason = "diverged";
        break;
      }
      bool eval_now = has_eval_ && c_.eval_every > 0 && step_ % c_.eval_every == 0;
      if (has_eval_ && c_.eval_every_fresh > 0 &&
          fresh_ / c_.eval_every_fresh > (fresh_ - new_fresh) / c_.eval_every_fresh)
        eval_now = true;  // this step crossed a multiple of eval_every_fresh
      if (eval_now && evaluation_point()) {
        r_.stop_reason = "target";
        done = true;
      }
      report(last_loss_, eval_now);
      if (!done && c_.checkpoint_every > 0 && step_ % c_.checkpoint_every == 0) checkpoint(false);
    }
  }

  // Whether the step goes ahead, the same answer on every rank. File sharding: ranks whose
  // shares are uneven run out at different steps: the job stops at the first step for
  // which some rank has no batch (the others' batches of that step are dropped), so that
  // no rank waits in an allreduce for a rank that has ended. Elastic sharding: at the
  // first step whose global batch is not whole (a lane has ended; its end is a fixed
  // position of the global order, so that is the same step for every world size, and
  // the rows of a short last batch are dropped even where the batch keeps its remainder).
  bool step_is_whole(const std::optional<Example>& batch) {
    std::vector<double> have{!batch     ? 0.0
                             : elastic_ ? static_cast<double>(batch->num_rows())
                                        : 1.0};
    if (dist_) dist_->sum(have);
    return have[0] >= (elastic_ ? static_cast<double>(global_batch_) : world_);
  }

  // One SGD step on `batch` (pulled since `t0`); returns its fresh rows.
  int64_t step(const Example& batch, int64_t t0) {
    const int64_t t1 = now_ns();
    TorchBatch tb = task_->to_torch(batch, *sig_);
    task_->check(tb, "training pipeline");
    int64_t new_fresh = 0, duplicates = 0, consumed = tb.rows;
    // The language model's blocks: the fresh sequences (id, epoch), and the copies of them
    // consumed (a sequence's pieces in several blocks are one copy). Otherwise the rows.
    const bool sequences = task_->sequence_reads(batch, sequences_);
    batch_keys_.clear();
    for (size_t i = 0; i < batch.num_rows(); ++i) {
      const RowMeta& m = batch.row(i);
      duplicates += batch_keys_.insert({m.id, m.epoch}) ? 0 : 1;
      if (!sequences) new_fresh += seen_.insert({m.id, m.epoch}) ? 1 : 0;
    }
    if (sequences) {
      consumed = 0;
      for (const ReadKey& q : sequences_) {
        new_fresh += seen_.insert({q.id, q.epoch}) ? 1 : 0;
        consumed += copies_.insert(q) ? 1 : 0;
      }
    }
    lr_ = learning_rate_at(c_.optimizer, step_, decay_steps_);
    set_learning_rate(*optimizer_, lr_);
    optimizer_->zero_grad();
    torch::Tensor loss = task_->loss(*model_, tb);
    loss.backward();
    last_loss_ = loss.item<float>();
    // The step's counts, over all ranks (one rank's are its share).
    int64_t rows = consumed, echo0 = tb.fresh;
    if (dist_) {
      // One allreduce: the gradients, and beside them the loss, the counts, an interrupt
      // on any rank and whether rank 0's clock ran out (small integers: exact in float).
      const bool time_up =
          lead_ && c_.max_seconds > 0 && train_s_ + (now_ns() - t0) / 1e9 >= c_.max_seconds;
      std::vector<float> extra{static_cast<float>(new_fresh), static_cast<float>(rows),
                               static_cast<float>(echo0),     stop_.load() ? 1.0f : 0.0f,
                               time_up ? 1.0f : 0.0f,         static_cast<float>(duplicates)};
      // Elastic sharding: weighted by rows, the mean over the global batch for any world size.
      dist_->average_gradients(*model_, last_loss_, extra,
                               elastic_ ? std::optional<int64_t>(tb.rows) : std::nullopt);
      new_fresh = std::llround(extra[0]);
      rows = std::llround(extra[1]);
      echo0 = std::llround(extra[2]);
      any_stop_ = extra[3] > 0;
      lead_time_up_ = extra[4] > 0;
      // The ranks' shares are disjoint: a row repeats within the global batch only
      // within its own rank's batch.
      duplicates = std::llround(extra[5]);
    }
    if (c_.optimizer.clip_norm > 0)  // after the average: every rank clips the same gradients
      torch::nn::utils::clip_grad_norm_(model_->parameters(), c_.optimizer.clip_norm);
    optimizer_->step();
    const int64_t t2 = now_ns();
    ++step_;
    fresh_ += new_fresh;
    echoed_ += rows - new_fresh;
    fresh_echo0_ += echo0;
    batch_duplicates_ += duplicates;
    r_.losses.push_back(last_loss_);
    loss_sum_ += last_loss_;
    ++loss_count_;
    wait_s_ += (t1 - t0) / 1e9;
    compute_s_ += (t2 - t1) / 1e9;
    train_s_ += (now_ns() - t0) / 1e9;
    return new_fresh;
  }

  double wall_now() const { return wall_base_ + (now_ns() - clock_start_) / 1e9; }
  fs::path snapshot_file(int64_t at_step) const {
    return snap_dir_ / ("step-" + std::to_string(at_step) + ".pt");
  }

  // ---- evaluate ----

  // Accuracy and mean loss of the model as it is now on `data`: per example, or for a
  // language model per target token (next-token accuracy, nats per token).
  void evaluate_model(EvalRecord& e, const HeldOut& data) {
    torch::NoGradGuard no_grad;
    model_->eval();
    EvalSums total;
    for (const auto& b : data.batches) {
      const EvalSums s = task_->evaluate(*model_, b);
      total.loss += s.loss;
      total.correct += s.correct;
      total.units += s.units;
    }
    model_->train();
    const double units = static_cast<double>(std::max<int64_t>(total.units, 1));
    e.accuracy = static_cast<double>(total.correct) / units;
    e.loss = total.loss / units;
    e.examples = data.examples;
    e.tokens = task_->per_token() ? total.units : 0;
  }

  // Records an evaluation; true when it meets the target.
  bool record_eval(const EvalRecord& e) {
    r_.evals.push_back(e);
    r_.final_eval = e;
    if (evals_file_.is_open()) {
      evals_file_ << e.to_json().dump() << "\n";
      evals_file_.flush();
    }
    const bool met = (c_.target_accuracy && e.accuracy >= *c_.target_accuracy) ||
                     (c_.target_loss && e.loss <= *c_.target_loss);
    if (met && !r_.reached_target) {
      r_.reached_target = true;
      r_.steps_to_target = e.step;
      r_.fresh_to_target = e.fresh;
      r_.raw_reads_to_target = e.raw_reads;
      r_.seconds_to_target = e.train_seconds;
      r_.wall_seconds_to_target = e.wall_seconds;
    }
    return met;
  }

  // The evaluation point's counts and clocks.
  EvalRecord point_record() {
    EvalRecord e;
    e.step = step_;
    e.fresh = fresh_;
    e.echoed = echoed_;
    e.raw_reads = source_reads(*train_);
    e.train_seconds = train_s_;
    if (dist_) {  // reads summed over ranks; the clock is rank 0's (the ranks step together)
      std::vector<double> v{static_cast<double>(e.raw_reads), lead_ ? train_s_ : 0.0};
      dist_->sum(v);
      e.raw_reads = static_cast<int64_t>(v[0]);
      e.train_seconds = v[1];
    }
    e.train_loss = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;
    e.lr = lr_;
    loss_sum_ = 0;
    loss_count_ = 0;
    last_eval_step_ = step_;
    return e;
  }

  // An evaluation point: evaluate now (inline), or copy the weights (snapshots, on the
  // training clock). True when an inline evaluation met the target.
  bool evaluation_point() {
    EvalRecord e = point_record();
    if (snapshots_mode_) {
      if (!lead_) return false;  // rank 0 keeps the snapshots and evaluates them
      const int64_t t0 = now_ns();
      Snapshot s{e, model_bytes(*model_)};
      if (!out_.empty()) {
        write_file(snapshot_file(step_), s.weights);
        s.weights.clear();
      }
      const double took = (now_ns() - t0) / 1e9;
      snap_s_ += took;
      train_s_ += took;
      s.record.wall_seconds = wall_now();
      snaps_.push_back(std::move(s));
      return false;
    }
    const int64_t t0 = now_ns();
    if (lead_) evaluate_model(e, eval_data_);
    if (dist_) {  // rank 0's evaluation, on every rank: they all stop at the same step
      std::vector<double> v{e.accuracy, e.loss, static_cast<double>(e.examples),
                            static_cast<double>(e.tokens)};
      if (!lead_) v.assign(v.size(), 0.0);
      dist_->sum(v);
      e.accuracy = v[0];
      e.loss = v[1];
      e.examples = static_cast<int64_t>(v[2]);
      e.tokens = static_cast<int64_t>(v[3]);
    }
    eval_s_ += (now_ns() - t0) / 1e9;
    e.wall_seconds = wall_now();
    return record_eval(e);
  }

  // The test set, on the model that first met the target (inline: the model now, as the
  // run stopped there) or else the final model.
  void evaluate_test(const char* which) {
    if (!has_test_ || !lead_) return;
    EvalRecord t = r_.final_eval.value_or(EvalRecord{});
    t.step = r_.steps_to_target.value_or(step_);
    evaluate_model(t, test_data_);
    r_.test_eval = t;
    r_.test_model = which;
  }

  void evaluate_after_training() {
    if (!lead_) return;  // rank 0 holds the snapshots and the test set
    if (!snapshots_mode_ || snaps_.empty()) {
      evaluate_test(r_.stop_reason == "target" ? "target" : "final");
      return;
    }
    // Off the clock: every snapshot, in order; the first that meets the target sets the
    // time to target. The trained model is put back afterwards.
    const int64_t t0 = now_ns();
    const std::string final_weights = model_bytes(*model_);
    bool tested = false;
    size_t done = 0;
    for (Snapshot& s : snaps_) {
      const fs::path file = snapshot_file(s.record.step);
      load_model_bytes(*model_, s.weights.empty() ? read_file(file) : s.weights);
      EvalRecord e = s.record;
      evaluate_model(e, eval_data_);
      ++done;
      char acc[32];
      std::snprintf(acc, sizeof acc, "%.4f", e.accuracy);
      progress_.status("evaluating snapshots after training: " + std::to_string(done) + "/" +
                           std::to_string(snaps_.size()) + " (step " + std::to_string(e.step) +
                           ", acc " + acc + ") | " + format_duration((now_ns() - t0) / 1e9),
                       done == 1 || done == snaps_.size());
      const bool first_hit = record_eval(e) && !tested && r_.steps_to_target == e.step;
      if (first_hit) {
        evaluate_test("target");
        tested = true;
      }
      if (!out_.empty() && !c_.keep_snapshots) fs::remove(file);
    }
    load_model_bytes(*model_, final_weights);
    if (!tested) evaluate_test("final");
    if (!out_.empty() && !c_.keep_snapshots) fs::remove(snap_dir_);
    eval_s_ += (now_ns() - t0) / 1e9;
    if (r_.reached_target && r_.stop_reason != "interrupted") r_.stop_reason = "target";
  }

  // ---- checkpoint ----

  // Written atomically: every file into checkpoint.tmp/ and synced, then renamed into
  // place (the previous one survives as checkpoint.old until then). Data-parallel: every
  // rank's pipeline state and read set go to rank 0, which writes them all (file
  // sharding) or their merge and union (elastic sharding).
  void checkpoint(bool pipeline_untouched) {
    if (out_.empty()) return;
    const int64_t t0 = now_ns();
    // Elastic sharding at the end of the data: ranks that took a batch of the dropped
    // last step stand a step past those that had none, and their states do not merge;
    // nothing is left to resume from there, so no pipeline state is written.
    const bool ended = elastic_ && r_.stop_reason == "end_of_data";
    std::vector<std::string> states{ended                ? std::string()
                                    : pipeline_untouched ? initial_pipeline_state_
                                                         : train_->save()};
    std::vector<std::string> reads{save_read_set(seen_)};
    std::vector<std::string> copies{save_read_set(copies_, /*copies=*/true)};
    if (dist_) {
      states = dist_->all_gather(states[0]);
      reads = dist_->all_gather(reads[0]);
      // Only a language model has sequence copies (the same task on every rank): image
      // runs keep one collective fewer per checkpoint.
      copies = task_->per_token() ? dist_->all_gather(copies[0])
                                  : std::vector<std::string>(static_cast<size_t>(world_));
      if (!lead_) {
        eval_s_ += (now_ns() - t0) / 1e9;
        return;
      }
    }
    if (elastic_) {  // one of each, which every rank restores from
      states = {ended ? std::string() : merge_elastic_states(states)};
      reads = {run_io::united_read_sets(reads)};
      copies = {run_io::united_read_sets(copies, /*copies=*/true)};
    }
    run_io::publish_checkpoint(out_, [&](const fs::path& tmp) {
      {
        torch::serialize::OutputArchive a;
        model_->save(a);
        a.save_to((tmp / "model.pt").string());
        torch::serialize::OutputArchive b;
        optimizer_->save(b);
        b.save_to((tmp / "optimizer.pt").string());
      }
      for (size_t r = 0; r < states.size(); ++r) {
        const int rank = static_cast<int>(r);
        if (!ended) write_file(tmp / rank_file("pipeline", ".state", rank), states[r]);
        write_file(tmp / rank_file("fresh_keys", ".bin", rank), reads[r]);
        if (!copies[r].empty()) write_file(tmp / rank_file("copy_keys", ".bin", rank), copies[r]);
      }
      write_file(tmp / "losses.bin", std::string(reinterpret_cast<const char*>(r_.losses.data()),
                                                 r_.losses.size() * sizeof(float)));
      write_file(tmp / "state.json", checkpoint_state(ended).dump(1) + "\n");
    });
    eval_s_ += (now_ns() - t0) / 1e9;  // bookkeeping, not training
  }

  // The checkpoint's state.json: the model, the world size (and elastic sharding's lanes),
  // the running counts and clocks, and the evaluations so far.
  nlohmann::json checkpoint_state(bool pipeline_ended) {
    nlohmann::json s;
    s["model"] = model_json_;
    s["world_size"] = world_;
    if (elastic_) {
      s["sharding"] = c_.sharding;
      s["lanes"] = c_.lanes;
      if (pipeline_ended) s["pipeline_ended"] = true;
    }
    checkpoint_fields([&](const char* key, const auto& v, bool) {
      if constexpr (is_optional<std::decay_t<decltype(v)>>::value)
        s[key] = opt_json(v);
      else
        s[key] = v;
    });
    s["wall_seconds"] = wall_now();
    s["evals"] = nlohmann::json::array();
    for (const auto& e : r_.evals) s["evals"].push_back(e.to_json());
    s["snapshots"] = nlohmann::json::array();
    for (const auto& sn : snaps_) s["snapshots"].push_back(sn.record.to_json());
    return s;
  }

  // ---- report ----

  void report(float loss, bool force) {
    ProgressInfo p;
    p.step = step_;
    p.fresh = fresh_;
    p.echoed = echoed_;
    p.train_seconds = train_s_;
    p.examples_per_s = train_s_ > 0 ? (fresh_ + echoed_) / train_s_ : 0;
    p.loss = loss;
    if (r_.final_eval) p.accuracy = r_.final_eval->accuracy;
    double eta = -1;
    auto consider = [&](double left) {
      if (left >= 0 && (eta < 0 || left < eta)) eta = left;
    };
    if (train_s_ > 0 && step_ > 0) {
      if (c_.max_steps > 0) consider((c_.max_steps - step_) * train_s_ / step_);
      if (c_.max_fresh > 0 && fresh_ > 0) consider((c_.max_fresh - fresh_) * train_s_ / fresh_);
    }
    if (c_.max_seconds > 0) consider(c_.max_seconds - train_s_);
    p.eta_seconds = eta;
    progress_.update(p, force);
  }

  void summarize(double train_wall) {
    r_.steps = step_;
    r_.fresh = fresh_;
    r_.echoed = echoed_;
    r_.fresh_by_echo_index = fresh_echo0_;
    r_.batch_duplicates = batch_duplicates_;
    r_.raw_reads = source_reads(*train_);
    r_.train_seconds = train_s_;
    r_.wait_seconds = wait_s_;
    r_.compute_seconds = compute_s_;
    r_.eval_seconds = eval_s_;
    r_.snapshot_seconds = snap_s_;
    r_.wall_seconds = snapshots_mode_ ? train_wall : wall_now();
    r_.pipeline_stats = train_->stats().to_json();
    if (const nlohmann::json t = train_->tuning(); t.contains("scale"))
      r_.pipeline_scale = t["scale"];
    r_.peak_rss_mib = peak_rss_mib();
    if (dist_) {
      // Reads summed over ranks; waiting, computing and memory: the largest rank's.
      std::vector<double> sums{static_cast<double>(r_.raw_reads)};
      dist_->sum(sums);
      r_.raw_reads = static_cast<int64_t>(sums[0]);
      std::vector<double> maxes{wait_s_, compute_s_, r_.peak_rss_mib.value_or(0),
                                dist_->communication_seconds()};
      dist_->max(maxes);
      r_.wait_seconds = maxes[0];
      r_.compute_seconds = maxes[1];
      if (r_.peak_rss_mib) r_.peak_rss_mib = maxes[2];
      r_.world_size = world_;
      r_.communication_seconds = maxes[3];
      // Every rank must hold the same model: each rank's serialized parameters and
      // buffers, compared bit for bit.
      const std::vector<std::string> models = dist_->all_gather(model_bytes(*model_));
      r_.ranks_identical = std::all_of(models.begin(), models.end(),
                                       [&](const std::string& m) { return m == models[0]; });
      if (!r_.ranks_identical && lead_)
        std::fprintf(stderr,
                     "dataecho train: warning: the ranks' models differ after training "
                     "(a bug: please report it)\n");
    }
    r_.achieved_echo =
        fresh_ > 0 ? static_cast<double>(fresh_ + echoed_) / static_cast<double>(fresh_) : 1.0;
    const double wait = r_.wait_seconds, compute = r_.compute_seconds;
    r_.pipeline_bound = wait > 0.05 * (wait + compute);
    r_.r_estimate = compute > 0 ? r_.achieved_echo * (wait + compute) / compute : 0.0;
    if (!out_.empty() && lead_)
      write_file(out_ / "summary.json", redact_json_urls(r_.to_json()).dump(2) + "\n");
  }

  // ---- what the run holds ----
  const TrainConfig& c_;
  const std::atomic<bool>& stop_;
  Classifier& model_out_;
  const int64_t decay_steps_;
  const bool has_eval_, has_test_, snapshots_mode_;
  const std::unique_ptr<Task> task_;  // classification or language modeling
  Collective* const dist_;            // null: one process
  const int rank_, world_;
  const bool lead_;     // rank 0: evaluates, reports and writes
  const bool elastic_;  // elastic sharding (TrainConfig::sharding)
  const fs::path out_, ckpt_dir_, snap_dir_;

  nlohmann::json model_json_, ckpt_;
  HeldOut eval_data_, test_data_;
  int64_t clock_start_ = 0;
  int64_t cpu_start_ns_ = 0;  // process_cpu_ns() at the start of run()
  double startup_s_ = 0;
  std::unique_ptr<Pipeline> train_;
  int64_t global_batch_ = 0;  // elastic sharding: the rows of a whole step over all ranks
  std::string initial_pipeline_state_;
  std::optional<Example> pending_;  // peeked at start-up, not trained on yet
  bool pipeline_untouched_ = true;
  std::optional<InputSignature> sig_;
  Classifier model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  TrainResult r_;

  // The running counts and clocks (checkpoint_fields).
  int64_t step_ = 0, fresh_ = 0, echoed_ = 0, fresh_echo0_ = 0, batch_duplicates_ = 0;
  ReadSet batch_keys_;  // the step's rows, to count repeats within its batch
  ReadSet seen_;        // the (id, epoch) pairs trained on so far
  ReadSet copies_;      // the language model's sequence copies consumed (id, epoch, copy)
  std::vector<ReadKey> sequences_;  // the step's (Task::sequence_reads), reused
  double train_s_ = 0, wait_s_ = 0, compute_s_ = 0, eval_s_ = 0, snap_s_ = 0, wall_base_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0, last_eval_step_ = -1;
  double lr_ = 0;
  float last_loss_ = 0;
  bool any_stop_ = false, lead_time_up_ = false;  // data-parallel: from the last step

  // "snapshots" mode: the evaluation points so far, evaluated after training.
  struct Snapshot {
    EvalRecord record;    // everything but accuracy and loss
    std::string weights;  // in memory when there is no output directory
  };
  std::vector<Snapshot> snaps_;
  std::ofstream evals_file_;
  ProgressLine progress_;
};

}  // namespace

TrainResult Trainer::run() {
  reset_peak_rss();  // the peak of this run, not of earlier ones in the same process
  validate_train_config(config_);
  torch::set_num_threads(config_.threads);
  return TrainRun(config_, stop_, state_->model).run();
}

}  // namespace dataecho::train
