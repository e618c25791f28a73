// `dataecho pipe SPEC`: runs a pipeline spec and prints one JSON line per element.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "commands.h"
#include "dataecho/core/example_json.h"
#include "dataecho/core/file_io.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho::cli {
namespace {

std::string read_state_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kNotFound, "pipe", "cannot open state file", path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The spec's pipeline; with a world size, as rank `rank` of it: the spec's elastic stage
// told so, or an elastic stage of `lanes` lanes put first.
std::unique_ptr<Pipeline> build_rank(const std::string& path, int64_t world_size, int64_t rank,
                                     int64_t lanes) {
  if (world_size <= 0) return build_pipeline_from_file(path);
  PipelineDef d = PipelineDef::from_json(load_spec_file(path));
  if (!d.stages().empty() && d.stages()[0].op == "elastic")
    d = d.with_option(0, "world_size", world_size).with_option(0, "rank", rank);
  else
    d = d.with_elastic_first(lanes, world_size, rank);
  BuildOptions o;
  if (const auto slash = path.find_last_of('/'); path != "-" && slash != std::string::npos)
    o.base_dir = path.substr(0, slash);
  return d.build(o);
}

// Writes the pipeline's state to `path` atomically, so that a process killed at any moment
// leaves the previous state or the new one.
void save_state_file(Pipeline& pipeline, const std::string& path) {
  write_file_atomically(path, pipeline.save(), "pipe");
}

struct PipeArgs {
  std::string spec;
  bool values = false;
  int64_t limit = -1;
  bool stats = false;
  std::string stats_json;
  std::string save_state;
  int64_t save_every = 0;
  std::vector<std::string> restore_state;
  int64_t world_size = 0;
  int64_t rank = 0;
  int64_t lanes = 12;
};

// Runs the pipeline as the command's arguments say.
void run_pipe(const PipeArgs& args) {
  if (args.save_every > 0 && args.save_state.empty())
    throw Error(ErrorCode::kInvalidArgument, "pipe", "--save-every needs --save-state FILE");
  auto pipeline = build_rank(args.spec, args.world_size, args.rank, args.lanes);
  if (args.restore_state.size() == 1) pipeline->restore(read_state_file(args.restore_state[0]));
  if (args.restore_state.size() > 1) {
    std::vector<std::string> states;
    for (const auto& path : args.restore_state) states.push_back(read_state_file(path));
    pipeline->restore(merge_elastic_states(states));
  }
  // std::cout stays synchronized with stdio: the service source's threads write to
  // std::cerr, which flushes std::cout (tied to it); unsynchronized, that flush races
  // with this thread's writes, and a stdout pipe that is full gets lines twice or torn.
  int64_t n = 0;
  while (args.limit < 0 || n < args.limit) {
    auto e = pipeline->next();
    if (!e) break;
    std::cout << example_to_json(*e, args.values).dump() << '\n';
    ++n;
    if (args.save_every > 0 && n % args.save_every == 0) {
      std::cout.flush();
      save_state_file(*pipeline, args.save_state);
      std::cerr << "pipe: state saved after " << n << " elements" << std::endl;
    }
  }
  std::cout.flush();
  if (!args.save_state.empty()) save_state_file(*pipeline, args.save_state);
  auto stats = pipeline->stats();
  if (args.stats) {
    std::cerr << stats.to_table();
    // What the tuner of "auto" settings chose, and each change with its reason.
    const nlohmann::json tuning = pipeline->tuning();
    for (const auto& c : tuning["changes"]) {
      std::cerr << "autotune " << c["t_s"].get<double>() << " s: " << c["node"].get<std::string>()
                << " " << c["param"].get<std::string>() << " " << c["from"].get<int64_t>() << " -> "
                << c["to"].get<int64_t>() << " (" << c["reason"].get<std::string>() << ")\n";
    }
  }
  if (!args.stats_json.empty()) {
    std::ofstream f(args.stats_json);
    f << stats.to_json().dump(2) << '\n';
    if (!f) throw Error(ErrorCode::kIo, "pipe", "cannot write stats file", args.stats_json);
  }
}

}  // namespace

void add_pipe_command(CLI::App& app) {
  auto args = std::make_shared<PipeArgs>();
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
  cmd->add_option("--save-every", args->save_every,
                  "also save the state to the --save-state FILE after every N elements printed "
                  "(each save replaces the file atomically)");
  cmd->add_option("--restore-state", args->restore_state,
                  "start from a state saved with --save-state (several: the states of every "
                  "rank of an elastic pipeline, merged)");
  cmd->add_option("--world-size", args->world_size,
                  "run as one of N ranks of an elastic pipeline (ops/elastic.h): the spec's "
                  "elastic stage, or one put first");
  cmd->add_option("--rank", args->rank, "this rank, with --world-size");
  cmd->add_option("--lanes", args->lanes,
                  "lanes of the elastic stage put first (default 12; the world size divides it)");
  cmd->callback([args] { run_pipe(*args); });
}

}  // namespace dataecho::cli
