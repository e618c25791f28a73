#include "dataecho/train/train_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dataecho/core/error.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/spec_reader.h"
#include "json_fields.h"

namespace dataecho::train {
namespace {

constexpr const char* kStage = "train config";

[[noreturn]] void config_error(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, kStage, message);
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// A spec given inline (an object) or as a file name relative to `base_dir`: its JSON,
// parsed by the caller once the config is read (a spec's own errors are the spec's).
std::optional<nlohmann::json> read_spec(SpecObject& o, const std::string& key,
                                        const std::string& base_dir, std::string& dir) {
  const nlohmann::json* j = o.raw(key);
  if (!j) return std::nullopt;
  if (j->is_string()) {
    const std::string path = resolve_spec_path(base_dir, j->get<std::string>());
    dir = dir_of(path);
    return load_spec_file(path);
  }
  if (!j->is_object())
    throw_spec_error(o.field_path(key), "expected a spec file name or a spec object");
  dir = base_dir;
  return *j;
}

bool language_model(const TrainConfig& c) { return c.model.language_model(); }
bool not_sgd(const TrainConfig& c) { return c.optimizer.kind != "sgd"; }

using json_fields::Field;
using json_fields::member;
constexpr auto kWhenGiven = Written::kWhenGiven;  // written when not at the default

// Every plain field of the config file, in the order it is read: its name (and object),
// bounds and choices as the reading checks them (defaults: TrainConfig's own), and when
// train_config_to_json writes it. The pipeline specs and "comment" are read apart
// (read_spec), as they are not values of the config itself.
const std::vector<Field<TrainConfig>>& config_fields() {
  using C = TrainConfig;
  using In = InputOptions;
  using M = ModelConfig;
  using O = OptimizerConfig;
  constexpr auto in = &C::input;
  constexpr auto m = &C::model;
  constexpr auto o = &C::optimizer;
  static const std::vector<Field<C>> fields = {
      member<C, &C::seed_pipeline>("", {.name = "seed_pipeline"}),
      member<C, &In::image_field, in>("input", {.name = "image_field"}),
      member<C, &In::label_field, in>("input", {.name = "label_field"}),
      member<C, &In::tokens_field, in>("input", {.name = "tokens_field"}, language_model),
      member<C, &In::document_field, in>("input", {.name = "document_field"}, language_model),
      member<C, &In::mean, in>("input", {.name = "mean", .written = kWhenGiven}),
      member<C, &In::std, in>("input", {.name = "std", .written = kWhenGiven}),
      member<C, &M::kind, m>("model", {.name = "kind"}),
      // Written as resolved (the model that ran); read as given (0: the kind's default).
      {"model",
       {.name = "depth", .fallback = 0, .min = 0},
       [](const C& c) { return nlohmann::json(c.model.resolved_depth()); },
       &json_fields::MemberOf<C, &M::depth, m>::read},
      {"model",
       {.name = "width", .fallback = 0, .min = 0},
       [](const C& c) { return nlohmann::json(c.model.resolved_width()); },
       &json_fields::MemberOf<C, &M::width, m>::read},
      member<C, &M::num_classes, m>("model", {.name = "num_classes", .min = 2}),
      member<C, &M::in_channels, m>("model", {.name = "in_channels", .min = 0}),
      // A language model's only: the model JSON of a classifier's checkpoint stays as it was.
      member<C, &M::heads, m>("model", {.name = "heads", .min = 1}, language_model),
      member<C, &M::context, m>("model", {.name = "context", .min = 0}, language_model),
      member<C, &M::vocab_size, m>("model", {.name = "vocab_size", .min = 2}, language_model),
      // Written for AdamW only (with beta2): the configs of SGD runs stay as they were.
      member<C, &O::kind, o>("optimizer", {.name = "kind", .choices = {"sgd", "adamw"}}, not_sgd),
      member<C, &O::lr, o>("optimizer", {.name = "lr"}),
      member<C, &O::momentum, o>("optimizer", {.name = "momentum"}),
      member<C, &O::nesterov, o>("optimizer", {.name = "nesterov"}),
      member<C, &O::weight_decay, o>("optimizer", {.name = "weight_decay"}),
      member<C, &O::warmup_steps, o>("optimizer", {.name = "warmup_steps", .min = 0}),
      member<C, &O::decay_steps, o>("optimizer", {.name = "decay_steps", .min = 0}),
      member<C, &O::final_lr_fraction, o>("optimizer", {.name = "final_lr_fraction"}),
      member<C, &O::beta2, o>("optimizer", {.name = "beta2"}, not_sgd),
      member<C, &O::clip_norm, o>("optimizer", {.name = "clip_norm", .written = kWhenGiven}),
      member<C, &C::target_accuracy>("", {.name = "target_accuracy", .written = kWhenGiven}),
      member<C, &C::target_loss>("", {.name = "target_loss", .written = kWhenGiven}),
      member<C, &C::max_fresh>("", {.name = "max_fresh"}),
      member<C, &C::max_steps>("", {.name = "max_steps"}),
      member<C, &C::max_seconds>("", {.name = "max_seconds"}),
      member<C, &C::threads>("", {.name = "threads"}),
      member<C, &C::cpu_split>("", {.name = "cpu_split", .written = kWhenGiven}),
      member<C, &C::seed>("", {.name = "seed", .min = 0}),
      // Relative to the current directory, as --out.
      member<C, &C::out>("", {.name = "out"}),
      member<C, &C::eval_every>("", {.name = "eval_every"}),
      member<C, &C::eval_every_fresh>("", {.name = "eval_every_fresh"}),
      member<C, &C::eval_mode>("", {.name = "eval_mode", .choices = {"inline", "snapshots"}}),
      member<C, &C::keep_snapshots>("", {.name = "keep_snapshots"}),
      member<C, &C::eval_at_end>("", {.name = "eval_at_end"}),
      member<C, &C::checkpoint_every>("", {.name = "checkpoint_every"}),
      // Written when not "files" and 12: the configs of file-sharded runs stay as they were.
      member<C, &C::sharding>(
          "", {.name = "sharding", .choices = {"files", "elastic"}, .written = kWhenGiven}),
      member<C, &C::lanes>("", {.name = "lanes", .min = 1, .written = kWhenGiven}),
      member<C, &C::progress>("", {.name = "progress"}),
      member<C, &C::progress_seconds>("", {.name = "progress_seconds"}),
  };
  return fields;
}

}  // namespace

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> kinds = {"mlp", "cnn", "resnet", "transformer"};
  return kinds;
}

int64_t ModelConfig::resolved_depth() const {
  if (depth > 0) return depth;
  if (kind == "resnet") return 20;
  return 2;  // mlp, cnn, transformer
}

int64_t ModelConfig::resolved_width() const {
  if (width > 0) return width;
  if (kind == "mlp") return 256;
  if (kind == "cnn") return 32;
  if (kind == "transformer") return 128;
  return 16;
}

double learning_rate_at(const OptimizerConfig& o, int64_t step, int64_t decay_steps) {
  if (o.warmup_steps > 0 && step < o.warmup_steps) {
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  if (decay_steps > o.warmup_steps) {
    double span = static_cast<double>(decay_steps - o.warmup_steps);
    double frac = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
    return o.lr * (1.0 - frac * (1.0 - o.final_lr_fraction));
  }
  return o.lr;
}

void load_spec_into(const std::string& path, std::optional<PipelineDef>& spec, std::string& dir) {
  spec = PipelineDef::from_json(load_spec_file(path));
  dir = dir_of(path);
}

TrainConfig train_config_from_json(const nlohmann::json& json, const std::string& base_dir) {
  TrainConfig c;
  std::optional<nlohmann::json> train, eval, test;
  try {
    SpecObject top(json, "$");
    top.raw("comment");
    train = read_spec(top, "train_spec", base_dir, c.train_spec_dir);
    eval = read_spec(top, "eval_spec", base_dir, c.eval_spec_dir);
    test = read_spec(top, "test_spec", base_dir, c.test_spec_dir);
    json_fields::read_fields(top, config_fields(), c);
    top.finish();
  } catch (const Error& e) {
    if (e.stage() != "spec") throw;
    throw Error(e.code(), kStage, e.message(), e.input());
  }
  if (train) c.train_spec = PipelineDef::from_json(*train);
  if (eval) c.eval_spec = PipelineDef::from_json(*eval);
  if (test) c.test_spec = PipelineDef::from_json(*test);
  return c;
}

TrainConfig load_train_config(const std::string& path) {
  nlohmann::json j = load_spec_file(path);
  try {
    return train_config_from_json(j, dir_of(path));
  } catch (const Error& e) {
    if (e.stage() != kStage || !e.input().empty()) throw;
    throw Error(e.code(), kStage, e.message(), path);
  }
}

nlohmann::json train_config_to_json(const TrainConfig& c) {
  nlohmann::json j = json_fields::write_fields(c, config_fields());
  j["train_spec"] = c.train_pipeline ? nlohmann::json("(in-process pipeline)")
                    : c.train_spec   ? c.train_spec->to_json()
                                     : nlohmann::json(nullptr);
  if (c.test_pipeline) {
    j["test_spec"] = "(in-process pipeline)";
  } else if (c.test_spec) {
    j["test_spec"] = c.test_spec->to_json();
  }
  if (c.eval_pipeline) {
    j["eval_spec"] = "(in-process pipeline)";
  } else if (c.eval_spec) {
    j["eval_spec"] = c.eval_spec->to_json();
  }
  return j;
}

namespace {

void validate_optimizer(const OptimizerConfig& o) {
  if (o.kind != "sgd" && o.kind != "adamw")
    config_error("optimizer kind must be \"sgd\" or \"adamw\", got \"" + o.kind + "\"");
  if (!(o.lr > 0)) config_error("learning rate must be > 0, got " + num(o.lr));
  if (!(o.momentum >= 0 && o.momentum < 1))
    config_error("momentum must be in [0, 1), got " + num(o.momentum));
  if (o.kind == "sgd" && o.nesterov && o.momentum <= 0)
    config_error("Nesterov momentum needs momentum > 0 (or set nesterov false)");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) config_error("beta2 must be in [0, 1), got " + num(o.beta2));
  if (!(o.weight_decay >= 0)) config_error("weight decay must be >= 0, got " + num(o.weight_decay));
  if (!(o.clip_norm >= 0)) config_error("clip_norm must be >= 0 (0: off), got " + num(o.clip_norm));
  if (o.warmup_steps < 0 || o.decay_steps < 0)
    config_error("warmup_steps and decay_steps must be >= 0");
  if (!(o.final_lr_fraction >= 0 && o.final_lr_fraction <= 1)) {
    config_error("final_lr_fraction must be in [0, 1], got " + num(o.final_lr_fraction));
  }
}

// The transformer's sizes; the context against the data is checked on the first batch.
void validate_language_model(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  if (m.heads < 1) config_error("model heads must be >= 1, got " + std::to_string(m.heads));
  if (m.resolved_width() % m.heads != 0) {
    config_error("transformer width " + std::to_string(m.resolved_width()) +
                 " is not a multiple of heads " + std::to_string(m.heads));
  }
  if (m.context < 0) config_error("model context must be >= 0 (0: from the data)");
  if (m.vocab_size < 2)
    config_error("model vocab_size must be >= 2, got " + std::to_string(m.vocab_size));
  if (c.target_accuracy)
    config_error("a language model's target is a loss (target_loss, nats per token)");
  if (c.input.tokens_field.empty()) config_error("input tokens_field must not be empty");
}

}  // namespace

void validate_train_config(const TrainConfig& c) {
  if (!c.train_pipeline && !c.train_spec) {
    config_error("no training pipeline: give a training spec (--train-spec or \"train_spec\")");
  }
  const auto& kinds = model_kinds();
  if (std::find(kinds.begin(), kinds.end(), c.model.kind) == kinds.end()) {
    config_error("unknown model \"" + c.model.kind + "\" (known: mlp, cnn, resnet, transformer)");
  }
  if (c.model.depth < 0 || c.model.width < 0)
    config_error("model depth and width must be >= 0 (0: the default)");
  if (c.model.kind == "resnet") {
    int64_t d = c.model.resolved_depth();
    if (d < 8 || (d - 2) % 6 != 0) {
      config_error("resnet depth must be 6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, ...), got " +
                   std::to_string(d));
    }
  }
  if (c.model.num_classes < 2)
    config_error("model num_classes must be >= 2, got " + std::to_string(c.model.num_classes));
  if (c.model.in_channels < 0) config_error("model in_channels must be >= 0 (0: from the data)");
  if (c.target_accuracy && !(*c.target_accuracy >= 0.0 && *c.target_accuracy <= 1.0)) {
    config_error("target accuracy must be in [0, 1], got " + num(*c.target_accuracy));
  }
  if (c.target_loss && !(*c.target_loss >= 0.0)) {
    config_error("target loss must be >= 0, got " + num(*c.target_loss));
  }
  bool has_eval = c.eval_pipeline || c.eval_spec.has_value();
  if ((c.target_accuracy || c.target_loss) && !has_eval) {
    config_error(
        "a target needs an evaluation pipeline: give an evaluation spec (--eval-spec or "
        "\"eval_spec\")");
  }
  if (c.max_fresh < 0)
    config_error("max_fresh must be >= 0 (0: no limit), got " + std::to_string(c.max_fresh));
  if (c.max_steps < 0)
    config_error("max_steps must be >= 0 (0: no limit), got " + std::to_string(c.max_steps));
  if (!(c.max_seconds >= 0))
    config_error("max_seconds must be >= 0 (0: no limit), got " + num(c.max_seconds));
  if (c.threads < 1 || c.threads > 1024)
    config_error("threads must be in [1, 1024], got " + std::to_string(c.threads));
  if (c.cpu_split < 0 || c.cpu_split > 1024)
    config_error("cpu_split must be in [0, 1024] (0: off), got " + std::to_string(c.cpu_split));
  // More LibTorch threads than the step's CPUs only take turns, and OpenMP's threads spin
  // while they wait for each other: 2 threads on 1 CPU measured 289.6 ms a step against
  // 25.8 ms with 1 (docs/protocol.md, the `--cpu-split` setup's one LibTorch thread).
  if (c.cpu_split > 0 && c.threads > c.cpu_split)
    config_error(
        "threads " + std::to_string(c.threads) + " > cpu_split " + std::to_string(c.cpu_split) +
        ": LibTorch's threads would share the step's " + std::to_string(c.cpu_split) +
        " CPU(s) and spin while they wait; set threads to at most " + std::to_string(c.cpu_split));
  if (c.eval_every_fresh < 0)
    config_error("eval_every_fresh must be >= 0 (0: off), got " +
                 std::to_string(c.eval_every_fresh));
  if (c.eval_mode != "inline" && c.eval_mode != "snapshots")
    config_error("eval_mode must be \"inline\" or \"snapshots\", got \"" + c.eval_mode + "\"");
  if (c.eval_every < 0)
    config_error("eval_every must be >= 0 (0: only at the end), got " +
                 std::to_string(c.eval_every));
  if (c.checkpoint_every < 0)
    config_error("checkpoint_every must be >= 0, got " + std::to_string(c.checkpoint_every));
  if (c.resume && c.out.empty()) config_error("--resume needs the run's output directory (--out)");
  if (c.sharding != "files" && c.sharding != "elastic")
    config_error("sharding must be \"files\" or \"elastic\", got \"" + c.sharding + "\"");
  if (c.lanes < 1) config_error("lanes must be >= 1, got " + std::to_string(c.lanes));
  if (c.sharding == "elastic" && c.train_pipeline)
    config_error(
        "elastic sharding needs a training spec (the trainer puts its elastic stage first): a "
        "training pipeline factory cannot be split into lanes");
  validate_optimizer(c.optimizer);
  if (c.model.language_model()) validate_language_model(c);
  for (double s : c.input.std) {
    if (!(s > 0)) config_error("input std values must be > 0, got " + num(s));
  }
  if (c.progress != "auto" && c.progress != "tty" && c.progress != "lines" && c.progress != "off") {
    config_error("progress must be auto, tty, lines or off, got \"" + c.progress + "\"");
  }
}

}  // namespace dataecho::train
