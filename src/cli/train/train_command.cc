// `dataecho train`: trains a model on a pipeline spec to a target accuracy (or loss) or
// until a budget runs out; writes evals.jsonl, summary.json and a checkpoint to --out.
// Ctrl-C stops after the current step with a checkpoint that --resume continues from.
#include <csignal>
#include <cstdio>
#include <iostream>

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

void add_train_command(CLI::App& app) {
  struct Args {
    std::string config, train_spec, eval_spec, model, out;
    int64_t depth = 0, width = 0, warmup_steps = 0, decay_steps = 0, max_fresh = 0, max_steps = 0;
    int64_t eval_every = 0, eval_every_fresh = 0, checkpoint_every = 0, num_classes = 0,
            in_channels = 0;
    double lr = 0, momentum = 0, weight_decay = 0, target_accuracy = 0, target_loss = 0,
           max_seconds = 0;
    int threads = 1, nproc = 1;
    double dist_timeout = 60;
    uint64_t seed = 0;
    bool resume = false, json = false;
    std::string progress;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", kTrainDescription);
  cmd->add_option("--config", a->config, "training config (JSON); the flags below override it");
  auto* o_train =
      cmd->add_option("--train-spec", a->train_spec, "training pipeline spec (JSON file)");
  auto* o_eval =
      cmd->add_option("--eval-spec", a->eval_spec, "evaluation pipeline spec (JSON file)");
  auto* o_model = cmd->add_option("--model", a->model, "mlp | cnn | resnet");
  auto* o_depth =
      cmd->add_option("--depth", a->depth, "mlp: hidden layers; cnn: conv blocks; resnet: 6n+2");
  auto* o_width = cmd->add_option("--width", a->width,
                                  "mlp: hidden units; cnn/resnet: channels of the first stage");
  auto* o_classes = cmd->add_option("--num-classes", a->num_classes, "classes (default 10)");
  auto* o_inch = cmd->add_option("--in-channels", a->in_channels,
                                 "image channels the model takes (default: the data's)");
  auto* o_lr = cmd->add_option("--lr", a->lr, "peak learning rate (default 0.1)");
  auto* o_mom = cmd->add_option("--momentum", a->momentum, "Nesterov momentum (default 0.9)");
  auto* o_wd = cmd->add_option("--weight-decay", a->weight_decay, "weight decay (default 5e-4)");
  auto* o_warm =
      cmd->add_option("--warmup-steps", a->warmup_steps, "linear warm-up steps (default 0)");
  auto* o_decay = cmd->add_option("--decay-steps", a->decay_steps,
                                  "linear decay to 0 over this many steps (default: --max-steps)");
  auto* o_acc = cmd->add_option("--target-accuracy", a->target_accuracy,
                                "stop when evaluation accuracy reaches this (in [0,1])");
  auto* o_loss =
      cmd->add_option("--target-loss", a->target_loss, "stop when evaluation loss falls to this");
  auto* o_fresh =
      cmd->add_option("--max-fresh", a->max_fresh, "budget: fresh examples read (0: none)");
  auto* o_steps = cmd->add_option("--max-steps", a->max_steps, "budget: train steps (0: none)");
  auto* o_secs =
      cmd->add_option("--max-seconds", a->max_seconds, "budget: training seconds (0: none)");
  auto* o_threads = cmd->add_option("--threads", a->threads, "LibTorch threads (default 1)");
  auto* o_seed = cmd->add_option("--seed", a->seed,
                                 "seed of the model and, unless 0, of the training pipeline");
  auto* o_every = cmd->add_option("--eval-every", a->eval_every,
                                  "steps between evaluations (default 100; 0: at the end)");
  auto* o_every_fresh = cmd->add_option(
      "--eval-every-fresh", a->eval_every_fresh,
      "or evaluate every this many fresh examples (comparable across echo factors)");
  auto* o_ckpt = cmd->add_option("--checkpoint-every", a->checkpoint_every,
                                 "steps between checkpoints (default: at the end)");
  auto* o_out =
      cmd->add_option("--out", a->out, "output directory: evals.jsonl, summary.json, checkpoint/");
  auto* o_prog = cmd->add_option("--progress", a->progress, "auto | tty | lines | off");
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
    auto given = [](CLI::Option* o) { return o->count() > 0; };
    if (given(o_train)) train::load_spec_into(a->train_spec, c.train_spec, c.train_spec_dir);
    if (given(o_eval)) train::load_spec_into(a->eval_spec, c.eval_spec, c.eval_spec_dir);
    if (given(o_model)) c.model.kind = a->model;
    if (given(o_depth)) c.model.depth = a->depth;
    if (given(o_width)) c.model.width = a->width;
    if (given(o_classes)) c.model.num_classes = a->num_classes;
    if (given(o_inch)) c.model.in_channels = a->in_channels;
    if (given(o_lr)) c.optimizer.lr = a->lr;
    if (given(o_mom)) c.optimizer.momentum = a->momentum;
    if (given(o_wd)) c.optimizer.weight_decay = a->weight_decay;
    if (given(o_warm)) c.optimizer.warmup_steps = a->warmup_steps;
    if (given(o_decay)) c.optimizer.decay_steps = a->decay_steps;
    if (given(o_acc)) c.target_accuracy = a->target_accuracy;
    if (given(o_loss)) c.target_loss = a->target_loss;
    if (given(o_fresh)) c.max_fresh = a->max_fresh;
    if (given(o_steps)) c.max_steps = a->max_steps;
    if (given(o_secs)) c.max_seconds = a->max_seconds;
    if (given(o_threads)) c.threads = a->threads;
    if (given(o_seed)) c.seed = a->seed;
    if (given(o_every)) c.eval_every = a->eval_every;
    if (given(o_every_fresh)) c.eval_every_fresh = a->eval_every_fresh;
    if (given(o_ckpt)) c.checkpoint_every = a->checkpoint_every;
    if (given(o_out)) c.out = a->out;
    if (given(o_prog)) c.progress = a->progress;
    c.resume = a->resume;
    const std::string out_dir = c.out;
    if (job && job->world_size > 1) {
      if (o_dist_timeout->count() > 0) job->timeout_seconds = a->dist_timeout;
      c.collective = train::Collective::connect(*job);
    }
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
    if (collective && collective->rank() != 0) return;  // rank 0 reports

    if (a->json) {
      std::cout << r.to_json().dump(2) << "\n";
      return;
    }
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
    if (!out_dir.empty())
      std::printf("outputs: %s/{summary.json,evals.jsonl,checkpoint/}\n", out_dir.c_str());
  });
}

}  // namespace dataecho::cli
