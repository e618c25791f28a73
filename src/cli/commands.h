// The `dataecho` tool's subcommands; each file adds one to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace dataecho::cli {

void add_pipe_command(CLI::App& app);

}  // namespace dataecho::cli
