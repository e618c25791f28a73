// The `dataecho` tool's subcommands; each file adds one to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace dataecho::cli {

void add_pipe_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_serve_command(CLI::App& app);
// `dataecho bench ...`: measurements a person runs by hand.
void add_bench_echo_command(CLI::App& bench);
void add_bench_read_command(CLI::App& bench);
#ifdef DATAECHO_HAVE_TRAINER
void add_train_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_experiment_command(CLI::App& app);
#endif

}  // namespace dataecho::cli
