// Placeholder until this subcommand lands; its owner replaces this file.
#include "cli/commands.h"

namespace dataecho::cli {

void add_profile_command(CLI::App& app) { (void)app; }

}  // namespace dataecho::cli
