// Placeholder until this subcommand lands; its owner replaces this file.
#include "commands.h"

namespace dataecho::cli {

void add_convert_command(CLI::App& app) { (void)app; }

}  // namespace dataecho::cli
