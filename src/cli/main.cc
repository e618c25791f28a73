#include <iostream>

#include "commands.h"
#include "dataecho/core/allocator.h"
#include "dataecho/core/error.h"

int main(int argc, char** argv) {
  dataecho::tune_allocator_for_pipelines();
  CLI::App app{"dataecho: an input pipeline for neural-network training, with data echoing"};
  app.require_subcommand(1);
  dataecho::cli::add_pipe_command(app);
  dataecho::cli::add_convert_command(app);
  dataecho::cli::add_serve_command(app);
#ifdef DATAECHO_HAVE_TRAINER
  dataecho::cli::add_train_command(app);
  dataecho::cli::add_profile_command(app);
  dataecho::cli::add_experiment_command(app);
#endif
  CLI::App* bench = app.add_subcommand("bench", "measure throughput (see README, Performance)");
  bench->require_subcommand(1);
  dataecho::cli::add_bench_echo_command(*bench);
  dataecho::cli::add_bench_read_command(*bench);
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
