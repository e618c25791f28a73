#include <iostream>

#include "commands.h"
#include "dataecho/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dataecho: an input pipeline for neural-network training, with data echoing"};
  app.require_subcommand(1);
  dataecho::cli::add_pipe_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dataecho::Error& e) {
    std::cerr << "dataecho: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dataecho: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
