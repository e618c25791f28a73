// The training loop of the paper's protocol: pull a batch (time blocked = wait), train
// on it (time = compute), count fresh and echoed rows, evaluate every N steps, stop at
// the target or when a budget runs out, checkpoint so that --resume continues exactly.
#include "dataecho/train/trainer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "dataecho/core/clock.h"
#include "dataecho/core/process_memory.h"
#include "dataecho/core/rng.h"
#include "dataecho/spec/build.h"
#include "dataecho/train/model.h"
#include "dataecho/train/optimizer.h"
#include "dataecho/train/torch_batch.h"
#include "progress.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStage = "train";

[[noreturn]] void fail(ErrorCode code, const std::string& message, const std::string& input = "") {
  throw Error(code, kStage, message, input);
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) fail(ErrorCode::kIo, "cannot write file", path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::kNotFound, "cannot open file", path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

template <class T>
nlohmann::json opt_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
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

std::unique_ptr<Pipeline> make_pipeline(const PipelineFactory& factory, nlohmann::json spec,
                                        const std::string& dir, std::optional<uint64_t> seed) {
  if (factory) return factory();
  if (seed && *seed != 0) {
    int64_t spec_seed =
        spec.contains("seed") && spec["seed"].is_number_integer() ? spec["seed"].get<int64_t>() : 0;
    spec["seed"] = static_cast<int64_t>(mix_seed(static_cast<uint64_t>(spec_seed), *seed) >> 1);
  }
  BuildOptions o;
  o.base_dir = dir;
  return build_pipeline(spec, o);
}

void check_labels(const TorchBatch& b, int64_t classes, const std::string& what) {
  if (b.rows == 0) return;
  int64_t lo = b.labels.min().item<int64_t>();
  int64_t hi = b.labels.max().item<int64_t>();
  if (lo < 0 || hi >= classes) {
    fail(ErrorCode::kInvalidArgument, what + ": label " + std::to_string(lo < 0 ? lo : hi) +
                                          " is outside [0, " + std::to_string(classes) +
                                          "); set model.num_classes to the number of classes");
  }
}

// A fresh read from storage: the source id and the pass (epoch) that read it.
struct ReadKey {
  int64_t id;
  int32_t epoch;
  friend bool operator==(const ReadKey&, const ReadKey&) = default;
};
struct ReadKeyHash {
  size_t operator()(const ReadKey& k) const {
    return std::hash<uint64_t>()(static_cast<uint64_t>(k.id) * 0x9E3779B97F4A7C15ull ^
                                 static_cast<uint32_t>(k.epoch));
  }
};
using ReadSet = std::unordered_set<ReadKey, ReadKeyHash>;

std::string save_read_set(const ReadSet& set) {
  std::string bytes;
  bytes.reserve(set.size() * 12);
  for (const ReadKey& k : set) {
    bytes.append(reinterpret_cast<const char*>(&k.id), sizeof k.id);
    bytes.append(reinterpret_cast<const char*>(&k.epoch), sizeof k.epoch);
  }
  return bytes;
}
ReadSet load_read_set(const std::string& bytes) {
  ReadSet set;
  set.reserve(bytes.size() / 12);
  for (size_t at = 0; at + 12 <= bytes.size(); at += 12) {
    ReadKey k;
    std::memcpy(&k.id, bytes.data() + at, sizeof k.id);
    std::memcpy(&k.epoch, bytes.data() + at + 8, sizeof k.epoch);
    set.insert(k);
  }
  return set;
}

// Elements the pipeline's source has produced so far (read-ahead included).
int64_t source_reads(const Pipeline& p) {
  PipelineStats st = p.stats();
  return st.nodes().empty() ? 0 : st.nodes().front()->rows.load();
}

std::string model_bytes(ClassifierImpl& model) {
  torch::serialize::OutputArchive a;
  model.save(a);
  std::ostringstream s;
  a.save_to(s);
  return s.str();
}
void load_model_bytes(ClassifierImpl& model, const std::string& bytes) {
  torch::serialize::InputArchive a;
  std::istringstream s(bytes);
  a.load_from(s);
  model.load(a);
}

}  // namespace

nlohmann::json EvalRecord::to_json() const {
  return {{"step", step},
          {"fresh", fresh},
          {"echoed", echoed},
          {"raw_reads", raw_reads},
          {"train_seconds", train_seconds},
          {"wall_seconds", wall_seconds},
          {"accuracy", accuracy},
          {"loss", loss},
          {"examples", examples},
          {"train_loss", train_loss},
          {"lr", lr}};
}

EvalRecord EvalRecord::from_json(const nlohmann::json& j) {
  EvalRecord r;
  r.step = j.at("step").get<int64_t>();
  r.fresh = j.at("fresh").get<int64_t>();
  r.echoed = j.at("echoed").get<int64_t>();
  r.raw_reads = j.value("raw_reads", int64_t{0});
  r.train_seconds = j.at("train_seconds").get<double>();
  r.wall_seconds = j.at("wall_seconds").get<double>();
  r.accuracy = j.at("accuracy").get<double>();
  r.loss = j.at("loss").get<double>();
  r.examples = j.at("examples").get<int64_t>();
  r.train_loss = j.at("train_loss").get<double>();
  r.lr = j.at("lr").get<double>();
  return r;
}

nlohmann::json TrainResult::to_json() const {
  nlohmann::json j;
  j["stop_reason"] = stop_reason;
  j["reached_target"] = reached_target;
  j["steps"] = steps;
  j["fresh"] = fresh;
  j["echoed"] = echoed;
  j["raw_reads"] = raw_reads;
  j["fresh_by_echo_index"] = fresh_by_echo_index;
  j["raw_reads_to_target"] = opt_json(raw_reads_to_target);
  j["steps_to_target"] = opt_json(steps_to_target);
  j["fresh_to_target"] = opt_json(fresh_to_target);
  j["seconds_to_target"] = opt_json(seconds_to_target);
  j["wall_seconds_to_target"] = opt_json(wall_seconds_to_target);
  j["wall_seconds"] = wall_seconds;
  j["startup_seconds"] = startup_seconds;
  j["peak_rss_mib"] = opt_json(peak_rss_mib);
  j["snapshot_seconds"] = snapshot_seconds;
  j["eval_mode"] = eval_mode;
  j["train_seconds"] = train_seconds;
  j["wait_seconds"] = wait_seconds;
  j["compute_seconds"] = compute_seconds;
  j["eval_seconds"] = eval_seconds;
  j["r_estimate"] = r_estimate;
  j["pipeline_bound"] = pipeline_bound;
  j["achieved_echo"] = achieved_echo;
  j["steps_per_second"] = train_seconds > 0 ? steps / train_seconds : 0.0;
  j["final_eval"] = final_eval ? final_eval->to_json() : nlohmann::json(nullptr);
  j["final_accuracy"] = final_eval ? nlohmann::json(final_eval->accuracy) : nlohmann::json(nullptr);
  j["final_loss"] = final_eval ? nlohmann::json(final_eval->loss) : nlohmann::json(nullptr);
  j["test_accuracy"] = test_eval ? nlohmann::json(test_eval->accuracy) : nlohmann::json(nullptr);
  j["test_examples"] = test_eval ? nlohmann::json(test_eval->examples) : nlohmann::json(nullptr);
  j["test_model"] = test_eval ? nlohmann::json(test_model) : nlohmann::json(nullptr);
  j["evaluations"] = static_cast<int64_t>(evals.size());
  j["input"] = input;
  j["parameters"] = parameters;
  j["pipeline_stats"] = pipeline_stats;
  return j;
}

struct Trainer::State {
  Classifier model;
  std::unique_ptr<torch::optim::SGD> optimizer;
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

}  // namespace

TrainResult Trainer::run() {
  reset_peak_rss();  // the peak of this run, not of earlier ones in the same process
  const TrainConfig& c = config_;
  validate_train_config(c);
  torch::set_num_threads(c.threads);
  const int64_t decay_steps = c.optimizer.decay_steps > 0 ? c.optimizer.decay_steps : c.max_steps;
  const bool has_eval = static_cast<bool>(c.eval_pipeline) || c.eval_spec.is_object();
  const bool snapshots_mode = c.eval_mode == "snapshots";
  const fs::path out = c.out;
  const fs::path ckpt_dir = out / "checkpoint";
  const fs::path snap_dir = out / "snapshots";
  auto snapshot_file = [&](int64_t at_step) {
    return snap_dir / ("step-" + std::to_string(at_step) + ".pt");
  };

  // ---- everything that can be refused is checked before the first step ----
  nlohmann::json model_json = train_config_to_json(c)["model"];
  nlohmann::json ckpt;
  if (c.resume) {
    if (!fs::exists(ckpt_dir / "state.json")) {
      fail(ErrorCode::kNotFound, "--resume: no checkpoint to resume from",
           (ckpt_dir / "state.json").string());
    }
    ckpt = nlohmann::json::parse(read_file(ckpt_dir / "state.json"));
    if (ckpt.at("model") != model_json) {
      fail(ErrorCode::kInvalidArgument,
           "--resume: the checkpoint was made with model " + ckpt.at("model").dump() + ", not " +
               model_json.dump(),
           ckpt_dir.string());
    }
  }

  // The evaluation (and test) sets are loaded before the training pipeline is built: the
  // training clock starts with that build, and its pipeline must not read ahead meanwhile.
  struct HeldOut {
    std::vector<TorchBatch> batches;
    std::optional<InputSignature> sig;
    int64_t examples = 0;
  };
  auto load_held_out = [&](const PipelineFactory& factory, const nlohmann::json& spec,
                           const std::string& dir, const std::string& what) {
    HeldOut h;
    std::unique_ptr<Pipeline> p = make_pipeline(factory, spec, dir, std::nullopt);
    while (auto b = p->next()) {
      InputSignature es = inspect_batch(*b, c.input, what);
      if (h.sig && !es.same_as(*h.sig))
        fail(ErrorCode::kInvalidArgument,
             what + ": its batches are " + es.describe() + " and " + h.sig->describe());
      h.sig = es;
      TorchBatch tb = batch_to_torch(*b, c.input, es);
      check_labels(tb, c.model.num_classes, what);
      h.examples += tb.rows;
      h.batches.push_back(std::move(tb));
    }
    if (h.examples == 0) fail(ErrorCode::kInvalidArgument, what + ": yielded no batch");
    return h;
  };
  HeldOut eval_data, test_data;
  const bool has_test = static_cast<bool>(c.test_pipeline) || c.test_spec.is_object();
  try {
    if (has_eval)
      eval_data =
          load_held_out(c.eval_pipeline, c.eval_spec, c.eval_spec_dir, "evaluation pipeline");
    if (has_test)
      test_data = load_held_out(c.test_pipeline, c.test_spec, c.test_spec_dir, "test pipeline");
  } catch (const Error&) {
    // A mistake that the training pipeline shares (a wrong field name) is reported for
    // the training pipeline, as a user reads the config: check its first batch first.
    std::unique_ptr<Pipeline> t =
        make_pipeline(c.train_pipeline, c.train_spec, c.train_spec_dir, std::nullopt);
    if (auto b = t->next()) inspect_batch(*b, c.input, "training pipeline");
    throw;
  }

  const int64_t clock_start = now_ns();  // the training clock: build the pipeline
  std::unique_ptr<Pipeline> train =
      make_pipeline(c.train_pipeline, c.train_spec, c.train_spec_dir,
                    c.seed_pipeline ? std::optional<uint64_t>(c.seed) : std::nullopt);
  if (c.resume) train->restore(read_file(ckpt_dir / "pipeline.state"));
  const std::string initial_pipeline_state = out.empty() ? std::string() : train->save();
  std::optional<Example> pending = train->next();
  if (!pending) {
    fail(ErrorCode::kInvalidArgument, c.resume
                                          ? "training pipeline: nothing left after the checkpoint"
                                          : "training pipeline: yielded no batch");
  }
  const double startup_s = (now_ns() - clock_start) / 1e9;
  const InputSignature sig = inspect_batch(*pending, c.input, "training pipeline");
  for (const auto& [held, what] :
       {std::pair{&eval_data, "evaluation"}, std::pair{&test_data, "test"}}) {
    if (held->sig && !held->sig->same_as(sig)) {
      fail(ErrorCode::kInvalidArgument, std::string(what) + " pipeline: its images are " +
                                            held->sig->describe() +
                                            " but the training pipeline's are " + sig.describe() +
                                            "; both specs must produce the same representation");
    }
  }

  torch::manual_seed(c.seed);
  Classifier model = make_model(c.model, sig.channels, sig.height, sig.width);
  std::unique_ptr<torch::optim::SGD> optimizer = make_optimizer(model->parameters(), c.optimizer);
  state_->model = model;

  TrainResult r;
  r.input = sig.describe();
  r.parameters = count_parameters(*model);
  r.eval_mode = c.eval_mode;
  r.startup_seconds = startup_s;
  int64_t step = 0, fresh = 0, echoed = 0, fresh_echo0 = 0;
  ReadSet seen;  // the (id, epoch) pairs trained on so far
  double train_s = 0, wait_s = 0, compute_s = 0, eval_s = 0, snap_s = 0, wall_base = 0;
  double loss_sum = 0;
  int64_t loss_count = 0, last_eval_step = -1;
  double lr = learning_rate_at(c.optimizer, 0, decay_steps);
  // "snapshots" mode: the evaluation points so far, evaluated after training.
  struct Snapshot {
    EvalRecord record;    // everything but accuracy and loss
    std::string weights;  // in memory when there is no output directory
  };
  std::vector<Snapshot> snaps;
  // The running counts and clocks a checkpoint saves and --resume restores, each named
  // once here: f(key, variable, required) (not required: absent from older checkpoints).
  auto checkpoint_fields = [&](auto&& f) {
    f("step", step, true);
    f("fresh", fresh, true);
    f("echoed", echoed, true);
    f("fresh_by_echo_index", fresh_echo0, false);
    f("train_seconds", train_s, true);
    f("wait_seconds", wait_s, true);
    f("compute_seconds", compute_s, true);
    f("eval_seconds", eval_s, true);
    f("snapshot_seconds", snap_s, false);
    f("loss_sum", loss_sum, true);
    f("loss_count", loss_count, true);
    f("last_eval_step", last_eval_step, true);
    f("lr", lr, true);
    f("reached_target", r.reached_target, true);
    f("steps_to_target", r.steps_to_target, false);
    f("fresh_to_target", r.fresh_to_target, false);
    f("raw_reads_to_target", r.raw_reads_to_target, false);
    f("seconds_to_target", r.seconds_to_target, false);
    f("wall_seconds_to_target", r.wall_seconds_to_target, false);
  };
  if (c.resume) {
    torch::serialize::InputArchive ma;
    ma.load_from((ckpt_dir / "model.pt").string());
    model->load(ma);
    torch::serialize::InputArchive oa;
    oa.load_from((ckpt_dir / "optimizer.pt").string());
    optimizer->load(oa);
    checkpoint_fields([&](const char* key, auto& v, bool required) {
      using T = std::decay_t<decltype(v)>;
      if constexpr (is_optional<T>::value) {
        v = json_opt<typename T::value_type>(ckpt, key);
      } else if (required || ckpt.contains(key)) {
        v = ckpt.at(key).get<T>();
      }
    });
    wall_base = ckpt.at("wall_seconds").get<double>();
    for (const auto& e : ckpt.at("evals")) r.evals.push_back(EvalRecord::from_json(e));
    for (const auto& e : ckpt.value("snapshots", nlohmann::json::array()))
      snaps.push_back({EvalRecord::from_json(e), {}});
    std::string lb = read_file(ckpt_dir / "losses.bin");
    r.losses.resize(lb.size() / sizeof(float));
    std::memcpy(r.losses.data(), lb.data(), r.losses.size() * sizeof(float));
    if (fs::exists(ckpt_dir / "fresh_keys.bin"))
      seen = load_read_set(read_file(ckpt_dir / "fresh_keys.bin"));
  }
  train_s += startup_s;  // start-up and filling the buffers are training-side time
  if (!r.evals.empty()) r.final_eval = r.evals.back();

  std::ofstream evals_file;
  if (!out.empty()) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec)
      fail(ErrorCode::kIo, "cannot create the output directory: " + ec.message(), out.string());
    write_file(out / "config.json", train_config_to_json(c).dump(2) + "\n");
    if (snapshots_mode) fs::create_directories(snap_dir);
    // Rewritten from the checkpoint on resume: evaluations after it happen again.
    evals_file.open(out / "evals.jsonl", std::ios::trunc);
    if (!evals_file) fail(ErrorCode::kIo, "cannot write", (out / "evals.jsonl").string());
    for (const auto& e : r.evals) evals_file << e.to_json().dump() << "\n";
    evals_file.flush();
  }

  auto wall_now = [&] { return wall_base + (now_ns() - clock_start) / 1e9; };

  // Accuracy and mean loss of the model as it is now on the evaluation (or test) set.
  auto evaluate_model = [&](EvalRecord& e, const HeldOut* on = nullptr) {
    const HeldOut& data = on ? *on : eval_data;
    torch::NoGradGuard no_grad;
    model->eval();
    double loss_total = 0;
    int64_t correct = 0;
    for (const auto& b : data.batches) {
      torch::Tensor logits = model->forward(b.images);
      loss_total += torch::nn::functional::cross_entropy(
                        logits, b.labels,
                        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                        .item<double>();
      correct += logits.argmax(1).eq(b.labels).sum().item<int64_t>();
    }
    model->train();
    e.accuracy = static_cast<double>(correct) / static_cast<double>(data.examples);
    e.loss = loss_total / static_cast<double>(data.examples);
    e.examples = data.examples;
  };
  // Records an evaluation; true when it meets the target.
  auto record_eval = [&](const EvalRecord& e) {
    r.evals.push_back(e);
    r.final_eval = e;
    if (evals_file.is_open()) {
      evals_file << e.to_json().dump() << "\n";
      evals_file.flush();
    }
    bool met = (c.target_accuracy && e.accuracy >= *c.target_accuracy) ||
               (c.target_loss && e.loss <= *c.target_loss);
    if (met && !r.reached_target) {
      r.reached_target = true;
      r.steps_to_target = e.step;
      r.fresh_to_target = e.fresh;
      r.raw_reads_to_target = e.raw_reads;
      r.seconds_to_target = e.train_seconds;
      r.wall_seconds_to_target = e.wall_seconds;
    }
    return met;
  };
  auto point_record = [&]() {  // the evaluation point's counts and clocks
    EvalRecord e;
    e.step = step;
    e.fresh = fresh;
    e.echoed = echoed;
    e.raw_reads = source_reads(*train);
    e.train_seconds = train_s;
    e.train_loss = loss_count > 0 ? loss_sum / static_cast<double>(loss_count) : 0.0;
    e.lr = lr;
    loss_sum = 0;
    loss_count = 0;
    last_eval_step = step;
    return e;
  };
  // An evaluation point: evaluate now (inline), or copy the weights (snapshots, on the
  // training clock). True when an inline evaluation met the target.
  auto evaluation_point = [&]() {
    EvalRecord e = point_record();
    if (snapshots_mode) {
      int64_t t0 = now_ns();
      Snapshot s{e, model_bytes(*model)};
      if (!out.empty()) {
        write_file(snapshot_file(step), s.weights);
        s.weights.clear();
      }
      const double took = (now_ns() - t0) / 1e9;
      snap_s += took;
      train_s += took;
      s.record.wall_seconds = wall_now();
      snaps.push_back(std::move(s));
      return false;
    }
    int64_t t0 = now_ns();
    evaluate_model(e);
    eval_s += (now_ns() - t0) / 1e9;
    e.wall_seconds = wall_now();
    return record_eval(e);
  };

  auto checkpoint = [&](bool pipeline_untouched) {
    if (out.empty()) return;
    int64_t t0 = now_ns();
    fs::path tmp = out / "checkpoint.tmp";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    {
      torch::serialize::OutputArchive a;
      model->save(a);
      a.save_to((tmp / "model.pt").string());
      torch::serialize::OutputArchive b;
      optimizer->save(b);
      b.save_to((tmp / "optimizer.pt").string());
    }
    write_file(tmp / "pipeline.state", pipeline_untouched ? initial_pipeline_state : train->save());
    write_file(tmp / "losses.bin", std::string(reinterpret_cast<const char*>(r.losses.data()),
                                               r.losses.size() * sizeof(float)));
    write_file(tmp / "fresh_keys.bin", save_read_set(seen));
    nlohmann::json s;
    s["model"] = model_json;
    checkpoint_fields([&](const char* key, const auto& v, bool) {
      if constexpr (is_optional<std::decay_t<decltype(v)>>::value)
        s[key] = opt_json(v);
      else
        s[key] = v;
    });
    s["wall_seconds"] = wall_now();
    s["evals"] = nlohmann::json::array();
    for (const auto& e : r.evals) s["evals"].push_back(e.to_json());
    s["snapshots"] = nlohmann::json::array();
    for (const auto& sn : snaps) s["snapshots"].push_back(sn.record.to_json());
    write_file(tmp / "state.json", s.dump(1) + "\n");
    fs::path old = out / "checkpoint.old";
    fs::remove_all(old);
    if (fs::exists(ckpt_dir)) fs::rename(ckpt_dir, old);
    fs::rename(tmp, ckpt_dir);
    fs::remove_all(old);
    eval_s += (now_ns() - t0) / 1e9;  // bookkeeping, not training
  };

  ProgressLine progress(c.progress, c.progress_seconds);
  auto report = [&](float loss, bool force) {
    ProgressInfo p;
    p.step = step;
    p.fresh = fresh;
    p.echoed = echoed;
    p.train_seconds = train_s;
    p.examples_per_s = train_s > 0 ? (fresh + echoed) / train_s : 0;
    p.loss = loss;
    if (r.final_eval) p.accuracy = r.final_eval->accuracy;
    double eta = -1;
    auto consider = [&](double left) {
      if (left >= 0 && (eta < 0 || left < eta)) eta = left;
    };
    if (train_s > 0 && step > 0) {
      if (c.max_steps > 0) consider((c.max_steps - step) * train_s / step);
      if (c.max_fresh > 0 && fresh > 0) consider((c.max_fresh - fresh) * train_s / fresh);
    }
    if (c.max_seconds > 0) consider(c.max_seconds - train_s);
    p.eta_seconds = eta;
    progress.update(p, force);
  };

  // ---- the loop ----
  model->train();
  bool pipeline_untouched = true;  // `pending` was peeked but not trained on yet
  bool done = c.resume && r.reached_target;
  r.stop_reason = done ? "target" : "";
  float last_loss = r.losses.empty() ? 0.0f : r.losses.back();
  while (!done) {
    int64_t t0 = now_ns();
    if (stop_.load()) {
      r.stop_reason = "interrupted";
      break;
    }
    if (c.max_steps > 0 && step >= c.max_steps) {
      r.stop_reason = "max_steps";
      break;
    }
    if (c.max_fresh > 0 && fresh >= c.max_fresh) {
      r.stop_reason = "max_fresh";
      break;
    }
    if (c.max_seconds > 0 && train_s >= c.max_seconds) {
      r.stop_reason = "max_seconds";
      break;
    }
    std::optional<Example> batch;
    if (pending) {
      batch = std::move(pending);
      pending.reset();
    } else {
      batch = train->next();
    }
    pipeline_untouched = false;
    int64_t t1 = now_ns();
    if (!batch) {
      r.stop_reason = "end_of_data";
      break;
    }
    TorchBatch tb = batch_to_torch(*batch, c.input, sig);
    check_labels(tb, c.model.num_classes, "training pipeline");
    int64_t new_fresh = 0;
    for (size_t i = 0; i < batch->num_rows(); ++i) {
      const RowMeta& m = batch->row(i);
      new_fresh += seen.insert({m.id, m.epoch}).second ? 1 : 0;
    }
    lr = learning_rate_at(c.optimizer, step, decay_steps);
    set_learning_rate(*optimizer, lr);
    optimizer->zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(tb.images), tb.labels);
    loss.backward();
    optimizer->step();
    last_loss = loss.item<float>();
    int64_t t2 = now_ns();
    ++step;
    fresh += new_fresh;
    echoed += tb.rows - new_fresh;
    fresh_echo0 += tb.fresh;
    r.losses.push_back(last_loss);
    loss_sum += last_loss;
    ++loss_count;
    wait_s += (t1 - t0) / 1e9;
    compute_s += (t2 - t1) / 1e9;
    train_s += (now_ns() - t0) / 1e9;
    if (!std::isfinite(last_loss)) {
      r.stop_reason = "diverged";
      break;
    }
    bool eval_now = has_eval && c.eval_every > 0 && step % c.eval_every == 0;
    if (has_eval && c.eval_every_fresh > 0 &&
        fresh / c.eval_every_fresh > (fresh - new_fresh) / c.eval_every_fresh)
      eval_now = true;  // this step crossed a multiple of eval_every_fresh
    if (eval_now && evaluation_point()) {
      r.stop_reason = "target";
      done = true;
    }
    report(last_loss, eval_now);
    if (!done && c.checkpoint_every > 0 && step % c.checkpoint_every == 0) checkpoint(false);
  }
  if (has_eval && c.eval_at_end && last_eval_step != step && r.stop_reason != "diverged")
    evaluation_point();
  checkpoint(pipeline_untouched);
  const double train_wall = wall_now();

  // The test set, on the model that first met the target (inline: the model now, as the
  // run stopped there) or else the final model.
  auto evaluate_test = [&](const char* which) {
    if (!has_test) return;
    EvalRecord t = r.final_eval.value_or(EvalRecord{});
    t.step = r.steps_to_target.value_or(step);
    evaluate_model(t, &test_data);
    r.test_eval = t;
    r.test_model = which;
  };
  if (snapshots_mode && !snaps.empty()) {
    // Off the clock: every snapshot, in order; the first that meets the target sets the
    // time to target. The trained model is put back afterwards.
    int64_t t0 = now_ns();
    const std::string final_weights = model_bytes(*model);
    bool tested = false;
    for (Snapshot& s : snaps) {
      const fs::path file = snapshot_file(s.record.step);
      load_model_bytes(*model, s.weights.empty() ? read_file(file) : s.weights);
      EvalRecord e = s.record;
      evaluate_model(e);
      const bool first_hit = record_eval(e) && !tested && r.steps_to_target == e.step;
      if (first_hit) {
        evaluate_test("target");
        tested = true;
      }
      if (!out.empty() && !c.keep_snapshots) fs::remove(file);
    }
    load_model_bytes(*model, final_weights);
    if (!tested) evaluate_test("final");
    if (!out.empty() && !c.keep_snapshots) fs::remove(snap_dir);
    eval_s += (now_ns() - t0) / 1e9;
    if (r.reached_target && r.stop_reason != "interrupted") r.stop_reason = "target";
  } else {
    evaluate_test(r.stop_reason == "target" ? "target" : "final");
  }
  report(last_loss, true);
  progress.finish();

  r.steps = step;
  r.fresh = fresh;
  r.echoed = echoed;
  r.fresh_by_echo_index = fresh_echo0;
  r.raw_reads = source_reads(*train);
  r.train_seconds = train_s;
  r.wait_seconds = wait_s;
  r.compute_seconds = compute_s;
  r.eval_seconds = eval_s;
  r.snapshot_seconds = snap_s;
  r.wall_seconds = snapshots_mode ? train_wall : wall_now();
  r.achieved_echo =
      fresh > 0 ? static_cast<double>(fresh + echoed) / static_cast<double>(fresh) : 1.0;
  r.pipeline_bound = wait_s > 0.05 * (wait_s + compute_s);
  r.r_estimate = compute_s > 0 ? r.achieved_echo * (wait_s + compute_s) / compute_s : 0.0;
  r.pipeline_stats = train->stats().to_json();
  r.peak_rss_mib = peak_rss_mib();
  if (!out.empty()) write_file(out / "summary.json", r.to_json().dump(2) + "\n");
  return r;
}

}  // namespace dataecho::train
