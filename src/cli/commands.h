// The `dataecho` tool's subcommands; each file adds one to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace dataecho::cli {

void add_pipe_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_spec_command(CLI::App& app);
// `dataecho dispatcher`, `dataecho worker`, `dataecho service status|stop-job`: the data
// service (docs/service.md).
void add_service_commands(CLI::App& app);
// `dataecho bench ...`: measurements a person runs by hand.
void add_bench_echo_command(CLI::App& bench);
void add_bench_read_command(CLI::App& bench);
// The training commands' descriptions: dataecho-train's own, and the forwarders that the
// `dataecho` tool lists in --help (src/cli/main.cc).
inline constexpr const char* kTrainDescription =
    "train a model on a pipeline spec to a target (see docs/train.md)";
inline constexpr const char* kProfileDescription =
    "measure the pipeline alone and the train step alone: R, the slowest stage, the echo to add";
inline constexpr const char* kExperimentDescription =
    "run a grid of training runs over echo variants, factors and seeds; write results.csv, "
    "results.json and plots (see docs/experiment.md)";
#ifdef DATAECHO_HAVE_TRAINER
void add_train_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_experiment_command(CLI::App& app);
#endif

}  // namespace dataecho::cli
