// Placeholder until this subcommand lands; its owner replaces this file.
#include "commands.h"

namespace dataecho::cli {

void add_bench_echo_command(CLI::App& bench) { (void)bench; }

}  // namespace dataecho::cli
