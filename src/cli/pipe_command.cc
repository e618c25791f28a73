// `dataecho pipe SPEC`: runs a pipeline spec and prints one JSON line per element.
#include <fstream>
#include <iostream>

#include "commands.h"
#include "dataecho/core/example_json.h"
#include "dataecho/spec/build.h"

namespace dataecho::cli {

void add_pipe_command(CLI::App& app) {
  struct Args {
    std::string spec;
    bool values = false;
    int64_t limit = -1;
    bool stats = false;
    std::string stats_json;
    std::string save_state;
    std::string restore_state;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd =
      app.add_subcommand("pipe", "run a pipeline spec; print one JSON line per element");
  cmd->add_option("spec", args->spec, "pipeline spec (JSON file, or - for standard input)")
      ->required();
  cmd->add_flag("--values", args->values, "print each tensor's values");
  cmd->add_option("--limit", args->limit, "stop after N elements");
  cmd->add_flag("--stats", args->stats, "end with the per-node stats table (on standard error)");
  cmd->add_option("--stats-json", args->stats_json, "write the per-node stats as JSON to FILE");
  cmd->add_option("--save-state", args->save_state,
                  "after the last element printed, save the pipeline state to FILE");
  cmd->add_option("--restore-state", args->restore_state,
                  "start from a state saved with --save-state");
  cmd->callback([args] {
    auto pipeline = build_pipeline_from_file(args->spec);
    if (!args->restore_state.empty()) {
      std::ifstream f(args->restore_state, std::ios::binary);
      if (!f)
        throw Error(ErrorCode::kNotFound, "pipe", "cannot open state file", args->restore_state);
      std::string state((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      pipeline->restore(state);
    }
    std::ios::sync_with_stdio(false);
    int64_t n = 0;
    while (args->limit < 0 || n < args->limit) {
      auto e = pipeline->next();
      if (!e) break;
      std::cout << example_to_json(*e, args->values).dump() << '\n';
      ++n;
    }
    std::cout.flush();
    if (!args->save_state.empty()) {
      std::ofstream f(args->save_state, std::ios::binary);
      f << pipeline->save();
      if (!f) throw Error(ErrorCode::kIo, "pipe", "cannot write state file", args->save_state);
    }
    auto stats = pipeline->stats();
    if (args->stats) {
      std::cerr << stats.to_table();
      // What the tuner of "auto" settings chose, and each change with its reason.
      const nlohmann::json tuning = pipeline->tuning();
      for (const auto& c : tuning["changes"]) {
        std::cerr << "autotune " << c["t_s"].get<double>() << " s: " << c["node"].get<std::string>()
                  << " " << c["param"].get<std::string>() << " " << c["from"].get<int64_t>()
                  << " -> " << c["to"].get<int64_t>() << " (" << c["reason"].get<std::string>()
                  << ")\n";
      }
    }
    if (!args->stats_json.empty()) {
      std::ofstream f(args->stats_json);
      f << stats.to_json().dump(2) << '\n';
      if (!f) throw Error(ErrorCode::kIo, "pipe", "cannot write stats file", args->stats_json);
    }
  });
}

}  // namespace dataecho::cli
