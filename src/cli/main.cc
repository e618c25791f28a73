// The `dataecho` and `dataecho-train` tools (CMakeLists.txt). dataecho-train has every
// command and links LibTorch. dataecho links only the engine, so that pipe, convert,
// serve and bench start in milliseconds, and runs its train, profile and experiment
// commands by executing dataecho-train from its own folder with the same arguments.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "dataecho/core/allocator.h"
#include "dataecho/core/error.h"
#include "dataecho/spec/spec_reader.h"

namespace {

#ifdef DATAECHO_FORWARD_TRAINER
// Replaces this process with dataecho-train (next to this binary) run on argv[1...].
[[noreturn]] void run_trainer_tool(int argc, char** argv) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto tool = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / "dataecho-train";
  const std::string name = tool.string();
  std::vector<char*> args;  // argv[0] kept: usage lines read "dataecho train ..."
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(name.c_str(), args.data());
  std::cerr << "dataecho: " << argv[1] << " runs " << name << ", which failed to start ("
            << std::strerror(errno)
            << "); build it with the trainer (cmake --build build --target dataecho_cli) or "
               "run dataecho-train directly\n";
  std::exit(1);
}
#endif

// The command word at argv[at] (a subcommand of `app`) when it names none: a clear error
// with the commands there are and the closest of them, instead of CLI11's "A
// subcommand is required". Returns the exit status, or -1 when the word is fine.
int check_command(CLI::App& app, int argc, char** argv, int at, const std::string& prefix) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(c->get_name());
  const std::string list = dataecho::comma_list(names);
  if (argc <= at) {
    std::cerr << "dataecho: " << prefix << "a command is required (" << list << "); " << prefix
              << "--help says what each does\n";
    return 2;
  }
  const std::string word = argv[at];
  if (word.empty() || word[0] == '-' || std::find(names.begin(), names.end(), word) != names.end())
    return -1;
  std::cerr << "dataecho: " << prefix << "unknown command \"" << word << "\""
            << dataecho::did_you_mean(word, names) << " (commands: " << list << ")\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef DATAECHO_FORWARD_TRAINER
  if (argc >= 2) {
    const std::string command = argv[1];
    if (command == "train" || command == "profile" || command == "experiment")
      run_trainer_tool(argc, argv);
  }
#endif
  dataecho::tune_allocator_for_pipelines();
  CLI::App app{"dataecho: an input pipeline for neural-network training, with data echoing"};
  app.require_subcommand(1);
  dataecho::cli::add_pipe_command(app);
  dataecho::cli::add_convert_command(app);
  dataecho::cli::add_serve_command(app);
  dataecho::cli::add_spec_command(app);
  dataecho::cli::add_service_commands(app);
#ifdef DATAECHO_HAVE_TRAINER
  dataecho::cli::add_train_command(app);
  dataecho::cli::add_profile_command(app);
  dataecho::cli::add_experiment_command(app);
#endif
#ifdef DATAECHO_FORWARD_TRAINER
  // Listed in --help; the commands themselves never reach here (run_trainer_tool).
  app.add_subcommand("train", dataecho::cli::kTrainDescription);
  app.add_subcommand("profile", dataecho::cli::kProfileDescription);
  app.add_subcommand("experiment", dataecho::cli::kExperimentDescription);
#endif
  CLI::App* bench =
      app.add_subcommand("bench", "measure throughput (docs/performance.md has every benchmark)");
  bench->require_subcommand(1);
  dataecho::cli::add_bench_echo_command(*bench);
  dataecho::cli::add_bench_read_command(*bench);
  if (const int rc = check_command(app, argc, argv, 1, ""); rc >= 0) return rc;
  if (std::string(argv[1]) == "bench")
    if (const int rc = check_command(*bench, argc, argv, 2, "bench "); rc >= 0) return rc;
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
