// `dataecho experiment SPEC`: runs a grid of training runs (echo variants, factors,
// shuffle after echo, batch sizes, seeds) derived from one base training config, one
// after the other; finished runs are skipped when rerun, so an interrupted sweep resumes.
// Writes results.csv, results.json and plots (docs/experiment.md). Ctrl-C ends the sweep
// after the current step; the unfinished run starts over on the next invocation.
// Exit status: 0, or 2 when some runs failed (the others ran and are in the table), 130
// when interrupted.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "dataecho/train/experiment.h"

namespace dataecho::cli {
namespace {

std::atomic<bool> g_experiment_stop{false};

extern "C" void on_experiment_interrupt(int) {
  g_experiment_stop.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

}  // namespace

void add_experiment_command(CLI::App& app) {
  struct Args {
    std::string spec, out, progress;
    int threads = 0;
    bool no_plots = false, report_only = false, dry_run = false, json = false, tune_only = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("experiment", kExperimentDescription);
  cmd->add_option("spec", a->spec, "experiment spec (JSON)")->required();
  auto* o_out = cmd->add_option("--out", a->out, "output directory (default: the spec's \"out\")");
  auto* o_threads =
      cmd->add_option("--threads", a->threads, "LibTorch threads (default: the base config's)");
  cmd->add_option("--progress", a->progress,
                  "the trainer's progress line: auto | tty | lines | off (default: the config's)");
  cmd->add_flag("--no-plots", a->no_plots, "do not run gnuplot");
  cmd->add_flag("--report-only", a->report_only,
                "train nothing: tables and plots from the result files already in the output");
  cmd->add_flag("--dry-run", a->dry_run,
                "derive and validate every cell and print its stages; train nothing");
  cmd->add_flag("--tune-only", a->tune_only,
                "tune every cell's learning rate; run no final seed (for final runs in another "
                "setup, from a spec whose tuning is \"from\" this one)");
  cmd->add_flag("--json", a->json, "print results.json to standard output");
  cmd->callback([=] {
    train::ExperimentSpec spec = train::load_experiment_spec(a->spec);
    if (o_out->count() > 0) spec.out = a->out;
    train::ExperimentOptions options;
    options.plots = !a->no_plots;
    options.progress = a->progress;
    options.dry_run = a->dry_run;
    options.tune_only = a->tune_only;
    if (o_threads->count() > 0) options.threads = a->threads;
    options.stop = &g_experiment_stop;

    const int64_t runs = train::final_run_count(spec);
    std::fprintf(stderr, "experiment %s: %zu cells, %lld final runs, output in %s\n",
                 spec.name.c_str(), spec.cells.size(), static_cast<long long>(runs),
                 spec.out.c_str());

    train::ExperimentReport report;
    if (a->report_only) {
      report = train::report_experiment(spec, options);
    } else {
      g_experiment_stop.store(false);
      auto previous = std::signal(SIGINT, on_experiment_interrupt);
      try {
        report = train::run_experiment(spec, options);
      } catch (...) {
        std::signal(SIGINT, previous);
        throw;
      }
      std::signal(SIGINT, previous);
    }
    if (a->dry_run) return;
    if (a->json) {
      std::ifstream in(report.json_path);
      std::cout << in.rdbuf();
    } else {
      std::cout << report.to_text();
    }
    std::fprintf(
        stderr, "runs: %lld trained, %lld skipped (done before), %lld failed, of %lld%s\n",
        static_cast<long long>(report.runs_trained), static_cast<long long>(report.runs_skipped),
        static_cast<long long>(report.runs_failed), static_cast<long long>(report.runs_total),
        report.interrupted ? " (interrupted: rerun to resume)" : "");
    std::fprintf(stderr, "results: %s, %s\n", report.csv_path.c_str(), report.json_path.c_str());
    if (!report.plots.empty()) {
      std::fprintf(stderr, "plots:");
      for (const auto& p : report.plots) std::fprintf(stderr, " %s", p.c_str());
      std::fprintf(stderr, "\n");
    }
    if (!report.plot_note.empty()) std::fprintf(stderr, "plots: %s\n", report.plot_note.c_str());
    if (report.interrupted) throw CLI::RuntimeError(130);
    if (report.runs_failed > 0) throw CLI::RuntimeError(2);  // reported above; the rest ran
  });
}

}  // namespace dataecho::cli
