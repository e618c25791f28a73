// `dataecho profile`: where the time goes in a training pipeline, R, and the echo factor
// and placement it recommends (docs/train.md).
#include <iostream>

#include "cli/commands.h"
#include "dataecho/train/profile.h"

namespace dataecho::cli {

void add_profile_command(CLI::App& app) {
  struct Args {
    std::string spec, model = "mlp";
    int64_t depth = 0, width = 0, num_classes = 10, steps = 20, batches = 0;
    double seconds = 5;
    int threads = 1;
    bool json = false, keep_echo = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("profile", kProfileDescription);
  cmd->add_option("spec", a->spec, "training pipeline spec (JSON file)")->required();
  cmd->add_option("--model", a->model,
                  "mlp | cnn | resnet | transformer (default mlp; transformer: a spec of token "
                  "blocks from pack)");
  cmd->add_option("--depth", a->depth, "model depth (0: the model's default)");
  cmd->add_option("--width", a->width, "model width (0: the model's default)");
  cmd->add_option("--num-classes", a->num_classes, "classes (default 10)");
  cmd->add_option("--threads", a->threads, "LibTorch threads (default 1)");
  cmd->add_option("--seconds", a->seconds,
                  "bound of each phase: the pipeline alone, then the train steps (default 5)");
  cmd->add_option("--batches", a->batches, "or stop the pipeline after this many batches");
  cmd->add_option("--steps", a->steps, "timed train steps (default 20)");
  cmd->add_flag("--keep-echo", a->keep_echo,
                "profile echo stages in the spec too (default: removed)");
  cmd->add_flag("--json", a->json, "print the report as JSON");
  cmd->callback([a] {
    train::ProfileOptions o;
    train::load_spec_into(a->spec, o.train_spec, o.train_spec_dir);
    o.model.kind = a->model;
    o.model.depth = a->depth;
    o.model.width = a->width;
    o.model.num_classes = a->num_classes;
    o.threads = a->threads;
    o.pipeline_seconds = a->seconds;
    o.pipeline_batches = a->batches;
    o.train_steps = a->steps;
    o.strip_echo = !a->keep_echo;
    o.progress = [](const std::string& line) { std::cerr << "profile: " << line << std::endl; };
    train::TrainConfig check;
    check.train_spec = o.train_spec;
    check.model = o.model;
    check.threads = o.threads;
    train::validate_train_config(check);
    train::ProfileReport r = train::run_profile(o);
    if (a->json) {
      std::cout << r.to_json().dump(2) << "\n";
    } else {
      std::cout << r.to_text();
    }
  });
}

}  // namespace dataecho::cli
