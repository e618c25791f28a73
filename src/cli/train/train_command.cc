// `dataecho train`: trains a model on a pipeline spec to a target accuracy (or loss) or
// until a budget runs out; writes evals.jsonl, summary.json and a checkpoint to --out.
// Ctrl-C stops after the current step with a checkpoint that --resume continues from.
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "dataecho/train/distributed.h"
#include "dataecho/train/trainer.h"
#include "launch.h"

namespace dataecho::cli {
namespace {

std::atomic<bool>* g_stop = nullptr;

extern "C" void on_interrupt(int) {
  if (g_stop) g_stop->store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

std::string opt_num(const std::optional<double>& v, const char* fmt) {
  if (!v) return "-";
  char b[64];
  std::snprintf(b, sizeof b, fmt, *v);
  return b;
}

}  // namespace

namespace {

// The flags that set a TrainConfig field, in one table: each, when given, overrides the
// value of --config (or the default). A flag's value lives beside its binding.
class ConfigFlags {
 public:
  explicit ConfigFlags(CLI::App* cmd) : cmd_(cmd) {}

  // A flag whose value `apply` writes into the config.
  template <class T>
  CLI::Option* add(const std::string& name, const std::string& help,
                   std::function<void(train::TrainConfig&, const T&)> apply) {
    auto value = std::make_shared<T>();
    CLI::Option* o = cmd_->add_option(name, *value, help);
    bindings_.push_back([o, value, apply](train::TrainConfig& c) {
      if (o->count() > 0) apply(c, *value);
    });
    return o;
  }
  // A flag bound to the field that `field` names.
  template <class T, class Field>
  CLI::Option* bind(const std::string& name, const std::string& help, Field field) {
    return add<T>(name, help, [field](train::TrainConfig& c, const T& v) { field(c) = v; });
  }
  void apply(train::TrainConfig& c) const {
    for (const auto& b : bindings_) b(c);
  }

 private:
  CLI::App* cmd_;
  std::vector<std::function<void(train::TrainConfig&)>> bindings_;
};

#define DATAECHO_FIELD(member) \
  [](train::TrainConfig & c) -> auto& { return c.member; }

// The language model's (--model transformer; docs/train.md, "The language model").
void bind_language_model_flags(ConfigFlags& f) {
  f.bind<int64_t>("--heads", "transformer: attention heads (default 4)",
                  DATAECHO_FIELD(model.heads));
  f.bind<int64_t>("--context",
                  "transformer: tokens it sees; the blocks hold context+1 (default: from the data)",
                  DATAECHO_FIELD(model.context));
  f.bind<int64_t>("--vocab-size", "transformer: vocabulary (default 257: tokenize's bytes)",
                  DATAECHO_FIELD(model.vocab_size));
  f.bind<double>("--clip-norm", "clip the gradients' global norm to this (default 0: off)",
                 DATAECHO_FIELD(optimizer.clip_norm));
  f.add<std::string>("--test-spec", "test pipeline spec (JSON file): scored once at the end",
                     [](train::TrainConfig& c, const std::string& path) {
                       train::load_spec_into(path, c.test_spec, c.test_spec_dir);
                     });
}

// The table: flag, help, field.
void bind_config_flags(ConfigFlags& f) {
  f.add<std::string>("--train-spec", "training pipeline spec (JSON file)",
                     [](train::TrainConfig& c, const std::string& path) {
                       train::load_spec_into(path, c.train_spec, c.train_spec_dir);
                     });
  f.add<std::string>("--eval-spec", "evaluation pipeline spec (JSON file)",
                     [](train::TrainConfig& c, const std::string& path) {
                       train::load_spec_into(path, c.eval_spec, c.eval_spec_dir);
                     });
  f.bind<std::string>("--model", "mlp | cnn | resnet | transformer", DATAECHO_FIELD(model.kind));
  f.bind<int64_t>("--depth",
                  "mlp: hidden layers; cnn: conv blocks; resnet: 6n+2; transformer: blocks",
                  DATAECHO_FIELD(model.depth));
  f.bind<int64_t>("--width",
                  "mlp: hidden units; cnn/resnet: channels of the first stage; transformer: width",
                  DATAECHO_FIELD(model.width));
  f.bind<int64_t>("--num-classes", "classes (default 10)", DATAECHO_FIELD(model.num_classes));
  f.bind<int64_t>("--in-channels", "image channels the model takes (default: the data's)",
                  DATAECHO_FIELD(model.in_channels));
  bind_language_model_flags(f);
  f.bind<std::string>("--optimizer", "sgd (Nesterov, default) | adamw",
                      DATAECHO_FIELD(optimizer.kind));
  f.bind<double>("--lr", "peak learning rate (default 0.1)", DATAECHO_FIELD(optimizer.lr));
  f.bind<double>("--momentum", "Nesterov momentum (default 0.9)",
                 DATAECHO_FIELD(optimizer.momentum));
  f.bind<double>("--weight-decay", "weight decay (default 5e-4)",
                 DATAECHO_FIELD(optimizer.weight_decay));
  f.bind<int64_t>("--warmup-steps", "linear warm-up steps (default 0)",
                  DATAECHO_FIELD(optimizer.warmup_steps));
  f.bind<int64_t>("--decay-steps",
                  "linear decay to lr * final_lr_fraction (a config's, default 0) over this many "
                  "steps (default: --max-steps)",
                  DATAECHO_FIELD(optimizer.decay_steps));
  f.bind<double>("--target-accuracy", "stop when evaluation accuracy reaches this (in [0,1])",
                 DATAECHO_FIELD(target_accuracy));
  f.bind<double>("--target-loss", "stop when evaluation loss falls to this",
                 DATAECHO_FIELD(target_loss));
  f.bind<int64_t>("--max-fresh", "budget: fresh examples read (0: none)",
                  DATAECHO_FIELD(max_fresh));
  f.bind<int64_t>("--max-steps", "budget: train steps (0: none)", DATAECHO_FIELD(max_steps));
  f.bind<double>("--max-seconds", "budget: training seconds (0: none)",
                 DATAECHO_FIELD(max_seconds));
  f.bind<int>("--threads", "LibTorch threads (default 1)", DATAECHO_FIELD(threads));
  f.bind<int>("--cpu-split",
              "the train step on the first N CPUs, the pipeline's threads on the rest (0: off)",
              DATAECHO_FIELD(cpu_split));
  f.bind<uint64_t>("--seed", "seed of the model and, unless 0, of the training pipeline",
                   DATAECHO_FIELD(seed));
  f.bind<int64_t>("--eval-every", "steps between evaluations (default 100; 0: at the end)",
                  DATAECHO_FIELD(eval_every));
  f.bind<int64_t>("--eval-every-fresh",
                  "or evaluate every this many fresh examples (comparable across echo factors)",
                  DATAECHO_FIELD(eval_every_fresh));
  f.bind<int64_t>("--checkpoint-every", "steps between checkpoints (default: at the end)",
                  DATAECHO_FIELD(checkpoint_every));
  f.bind<std::string>("--sharding",
                      "data-parallel: files (each rank its shard, batch per rank; default) | "
                      "elastic (lanes of one global order, the spec's batch global; resumes "
                      "on another number of ranks)",
                      DATAECHO_FIELD(sharding));
  f.bind<int64_t>("--lanes", "elastic sharding: lanes (default 12); the world sizes divide it",
                  DATAECHO_FIELD(lanes));
  f.bind<std::string>("--out", "output directory: evals.jsonl, summary.json, checkpoint/",
                      DATAECHO_FIELD(out));
  f.bind<std::string>("--progress", "auto | tty | lines | off", DATAECHO_FIELD(progress));
}

#undef DATAECHO_FIELD

// Trains, with Ctrl-C asking the trainer to stop after its step; a failure is announced
// to the other ranks.
train::TrainResult train_until_stopped(train::TrainConfig c) {
  const std::shared_ptr<train::Collective> collective = c.collective;
  train::Trainer trainer(std::move(c));
  g_stop = &trainer.stop_flag();
  auto previous = std::signal(SIGINT, on_interrupt);
  train::TrainResult r;
  try {
    r = trainer.run();
  } catch (const std::exception& e) {
    std::signal(SIGINT, previous);
    g_stop = nullptr;
    // The other ranks' errors then name this rank and why, rather than a lost peer.
    if (collective) collective->announce_failure(e.what());
    throw;
  }
  std::signal(SIGINT, previous);
  g_stop = nullptr;
  return r;
}

void print_summary(const train::TrainResult& r, const std::string& out_dir) {
  auto opt_int = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  std::optional<double> acc, loss;
  if (r.final_eval) {
    acc = r.final_eval->accuracy;
    loss = r.final_eval->loss;
  }
  std::printf("stopped: %s%s\n", r.stop_reason.c_str(),
              r.reached_target ? " (target reached)" : "");
  std::printf("steps %lld | fresh %lld | echoed %lld | achieved echo %.2f\n",
              static_cast<long long>(r.steps), static_cast<long long>(r.fresh),
              static_cast<long long>(r.echoed), r.achieved_echo);
  std::printf("to target: steps %s | fresh %s | %s s training | %s s wall\n",
              opt_int(r.steps_to_target).c_str(), opt_int(r.fresh_to_target).c_str(),
              opt_num(r.seconds_to_target, "%.2f").c_str(),
              opt_num(r.wall_seconds_to_target, "%.2f").c_str());
  std::printf(
      "time: %.2f s training (%.2f s waiting for the pipeline, %.2f s computing), %.2f s "
      "evaluating, %.2f s wall\n",
      r.train_seconds, r.wait_seconds, r.compute_seconds, r.eval_seconds, r.wall_seconds);
  std::printf("R (upstream/downstream time per batch) ~ %.2f (%s)\n", r.r_estimate,
              r.pipeline_bound ? "pipeline-bound: measured" : "training-bound: an upper bound");
  std::printf("final evaluation: accuracy %s | loss %s\n", opt_num(acc, "%.4f").c_str(),
              opt_num(loss, "%.4f").c_str());
  if (r.final_eval && r.final_eval->tokens > 0) {
    std::printf(
        "language model: %lld validation tokens, %.4f bits per byte (loss / ln 2)%s\n",
        static_cast<long long>(r.final_eval->tokens), r.final_eval->bits_per_byte(),
        r.test_eval ? (", test " + opt_num(r.test_eval->bits_per_byte(), "%.4f")).c_str() : "");
  }
  if (!out_dir.empty())
    std::printf("outputs: %s/{summary.json,evals.jsonl,checkpoint/}\n", out_dir.c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  struct Args {
    std::string config;
    int nproc = 1;
    double dist_timeout = 60;
    bool resume = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", kTrainDescription);
  cmd->add_option("--config", a->config, "training config (JSON); the flags below override it");
  auto flags = std::make_shared<ConfigFlags>(cmd);
  bind_config_flags(*flags);
  auto* o_nproc = cmd->add_option(
      "--nproc", a->nproc,
      "data-parallel: run as this many local ranks (several machines: torchrun's RANK, "
      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT instead; docs/distributed.md)");
  o_nproc->check(CLI::Range(1, 1024));
  auto* o_dist_timeout = cmd->add_option(
      "--dist-timeout", a->dist_timeout,
      "data-parallel: seconds a rank waits for a lost peer before every rank exits (default 60)");
  o_dist_timeout->check(CLI::PositiveNumber);
  cmd->add_flag("--resume", a->resume, "continue from the checkpoint in --out");
  cmd->add_flag("--json", a->json,
                "print summary.json to standard output instead of the text summary");
  cmd->callback([=] {
    std::optional<train::DistributedOptions> job = train::distributed_from_env();
    const bool launched = std::getenv(kLaunchedRankVariable) != nullptr;
    if (a->nproc > 1 && !launched) {
      if (job)
        throw Error(ErrorCode::kInvalidArgument, "train",
                    "--nproc starts its own ranks, but WORLD_SIZE is already set (torchrun?): "
                    "use one or the other");
      train::require_distributed();
      launch_local_ranks(a->nproc, a->dist_timeout, 10);
      return;
    }
    train::TrainConfig c;
    if (!a->config.empty()) c = train::load_train_config(a->config);
    flags->apply(c);
    c.resume = a->resume;
    const std::string out_dir = c.out;
    if (job && job->world_size > 1) {
      if (o_dist_timeout->count() > 0) job->timeout_seconds = a->dist_timeout;
      c.collective = train::Collective::connect(*job);
    }
    const std::shared_ptr<train::Collective> collective = c.collective;
    const train::TrainResult r = train_until_stopped(std::move(c));
    if (collective && collective->rank() != 0) return;  // rank 0 reports
    if (a->json) {
      std::cout << r.to_json().dump(2) << "\n";
      return;
    }
    print_summary(r, out_dir);
  });
}

}  // namespace dataecho::cli
