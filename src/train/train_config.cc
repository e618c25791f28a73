#include "dataecho/train/train_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dataecho/core/error.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/spec_reader.h"

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

std::vector<double> number_list(SpecObject& o, const std::string& key) {
  const nlohmann::json* j = o.raw(key);
  std::vector<double> out;
  if (!j) return out;
  if (j->is_number()) return {j->get<double>()};
  if (!j->is_array()) throw_spec_error(o.field_path(key), "expected a number or a list of numbers");
  for (const auto& v : *j) {
    if (!v.is_number()) throw_spec_error(o.field_path(key), "expected a list of numbers");
    out.push_back(v.get<double>());
  }
  return out;
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
    c.seed_pipeline = top.get_bool("seed_pipeline", c.seed_pipeline);

    SpecObject in = top.get_object("input");
    c.input.image_field = in.get_string("image_field", c.input.image_field);
    c.input.label_field = in.get_string("label_field", c.input.label_field);
    c.input.tokens_field = in.get_string("tokens_field", c.input.tokens_field);
    c.input.document_field = in.get_string("document_field", c.input.document_field);
    c.input.mean = number_list(in, "mean");
    c.input.std = number_list(in, "std");
    in.finish();

    SpecObject m = top.get_object("model");
    c.model.kind = m.get_string("kind", c.model.kind);
    c.model.depth = m.get_int("depth", 0, 0);
    c.model.width = m.get_int("width", 0, 0);
    c.model.num_classes = m.get_int("num_classes", c.model.num_classes, 2);
    c.model.in_channels = m.get_int("in_channels", 0, 0);
    c.model.heads = m.get_int("heads", c.model.heads, 1);
    c.model.context = m.get_int("context", 0, 0);
    c.model.vocab_size = m.get_int("vocab_size", c.model.vocab_size, 2);
    m.finish();

    SpecObject o = top.get_object("optimizer");
    c.optimizer.kind = o.get_string("kind", c.optimizer.kind, {"sgd", "adamw"});
    c.optimizer.lr = o.get_number("lr", c.optimizer.lr);
    c.optimizer.momentum = o.get_number("momentum", c.optimizer.momentum);
    c.optimizer.nesterov = o.get_bool("nesterov", c.optimizer.nesterov);
    c.optimizer.weight_decay = o.get_number("weight_decay", c.optimizer.weight_decay);
    c.optimizer.warmup_steps = o.get_int("warmup_steps", 0, 0);
    c.optimizer.decay_steps = o.get_int("decay_steps", 0, 0);
    c.optimizer.final_lr_fraction = o.get_number("final_lr_fraction", 0.0);
    c.optimizer.beta2 = o.get_number("beta2", c.optimizer.beta2);
    c.optimizer.clip_norm = o.get_number("clip_norm", c.optimizer.clip_norm);
    o.finish();

    if (top.has("target_accuracy")) c.target_accuracy = top.get_number("target_accuracy");
    if (top.has("target_loss")) c.target_loss = top.get_number("target_loss");
    c.max_fresh = top.get_int("max_fresh", 0);
    c.max_steps = top.get_int("max_steps", 0);
    c.max_seconds = top.get_number("max_seconds", 0.0);
    c.threads = static_cast<int>(top.get_int("threads", c.threads));
    c.cpu_split = static_cast<int>(top.get_int("cpu_split", c.cpu_split));
    c.seed = static_cast<uint64_t>(top.get_int("seed", 0, 0));
    c.out = top.get_string("out", c.out);  // relative to the current directory, as --out
    c.eval_every = top.get_int("eval_every", c.eval_every);
    c.eval_every_fresh = top.get_int("eval_every_fresh", c.eval_every_fresh);
    c.eval_mode = top.get_string("eval_mode", c.eval_mode, {"inline", "snapshots"});
    c.keep_snapshots = top.get_bool("keep_snapshots", c.keep_snapshots);
    c.eval_at_end = top.get_bool("eval_at_end", c.eval_at_end);
    c.checkpoint_every = top.get_int("checkpoint_every", c.checkpoint_every);
    c.progress = top.get_string("progress", c.progress);
    c.progress_seconds = top.get_number("progress_seconds", c.progress_seconds);
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
  nlohmann::json j;
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
  j["seed_pipeline"] = c.seed_pipeline;
  j["input"] = {{"image_field", c.input.image_field}, {"label_field", c.input.label_field}};
  if (c.model.language_model()) {
    j["input"]["tokens_field"] = c.input.tokens_field;
    j["input"]["document_field"] = c.input.document_field;
  }
  if (!c.input.mean.empty()) j["input"]["mean"] = c.input.mean;
  if (!c.input.std.empty()) j["input"]["std"] = c.input.std;
  j["model"] = {{"kind", c.model.kind},
                {"depth", c.model.resolved_depth()},
                {"width", c.model.resolved_width()},
                {"num_classes", c.model.num_classes},
                {"in_channels", c.model.in_channels}};
  if (c.model.language_model()) {  // only here: older checkpoints' model JSON stays the same
    j["model"]["heads"] = c.model.heads;
    j["model"]["context"] = c.model.context;
    j["model"]["vocab_size"] = c.model.vocab_size;
  }
  j["optimizer"] = {{"lr", c.optimizer.lr},
                    {"momentum", c.optimizer.momentum},
                    {"nesterov", c.optimizer.nesterov},
                    {"weight_decay", c.optimizer.weight_decay},
                    {"warmup_steps", c.optimizer.warmup_steps},
                    {"decay_steps", c.optimizer.decay_steps},
                    {"final_lr_fraction", c.optimizer.final_lr_fraction}};
  if (c.optimizer.kind != "sgd") {  // only then: the configs of earlier runs stay the same
    j["optimizer"]["kind"] = c.optimizer.kind;
    j["optimizer"]["beta2"] = c.optimizer.beta2;
  }
  if (c.optimizer.clip_norm > 0) j["optimizer"]["clip_norm"] = c.optimizer.clip_norm;
  if (c.target_accuracy) j["target_accuracy"] = *c.target_accuracy;
  if (c.target_loss) j["target_loss"] = *c.target_loss;
  j["max_fresh"] = c.max_fresh;
  j["max_steps"] = c.max_steps;
  j["max_seconds"] = c.max_seconds;
  j["threads"] = c.threads;
  if (c.cpu_split != 0) j["cpu_split"] = c.cpu_split;  // only then, as clip_norm
  j["seed"] = c.seed;
  j["out"] = c.out;
  j["eval_every"] = c.eval_every;
  j["eval_every_fresh"] = c.eval_every_fresh;
  j["eval_mode"] = c.eval_mode;
  j["keep_snapshots"] = c.keep_snapshots;
  j["eval_at_end"] = c.eval_at_end;
  j["checkpoint_every"] = c.checkpoint_every;
  j["progress"] = c.progress;
  j["progress_seconds"] = c.progress_seconds;
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
