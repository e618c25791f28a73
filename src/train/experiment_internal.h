// Shared between experiment.cc (the sweep) and experiment_report.cc (tables, plots).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/train/experiment.h"
#include "dataecho/train/train_config.h"

namespace dataecho::train::detail {

// A bad experiment spec or config: kInvalidArgument, stage "experiment".
[[noreturn]] void experiment_error(const std::string& message, const std::string& input = "");

std::string run_dir(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed);
TrainConfig cell_config(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                        const ExperimentOptions& options, nlohmann::json* identity);
nlohmann::json read_json_file(const std::string& path);  // null when missing or unreadable
// The cell's copy for tuning runs at `lr` (its runs under cells/<id>/tune/lr-<lr>/).
ExperimentCell tuning_cell(const ExperimentCell& cell, double lr);
// The summary of a finished run of this cell's current config, or null.
nlohmann::json finished_summary(const ExperimentSpec& spec, const ExperimentCell& cell,
                                uint64_t seed);
// Fresh examples to target, or (censored) at the end of a run that missed it.
Observation fresh_observation(const nlohmann::json& summary);
void write_json_file(const std::string& path, const nlohmann::json& j);  // via a rename
// The evaluations of the run in `dir` (its evals.jsonl), as {fresh, accuracy, loss} rows
// in order (loss NaN where an evaluation has none). A missing file gives none; a line that is not
// an evaluation is skipped, and the first such line is described in *error (file and line number)
// when error is given.
std::vector<std::vector<double>> read_evals(const std::string& dir, std::string* error = nullptr);
// The same evaluations as their JSON objects, every field kept (step, train_seconds, ...).
std::vector<nlohmann::json> read_eval_objects(const std::string& dir, std::string* error = nullptr);

// How an experiment reads "reaching the target" (TuningSpec::reading, or that of the
// experiment its rates come from): the first touch, or "held" with its margin.
struct TargetReading {
  bool held = false;
  double margin = 0;
};
TargetReading target_reading(const ExperimentSpec& spec);
// What a "held" reading holds for a cell's runs: the cell's accuracy target (its
// overrides may set one), or else its loss target, with the experiment's margin. nullopt
// where the experiment reads the first touch. Computed once per cell: it derives the
// cell's config.
struct HeldTarget {
  double value = 0;
  bool loss = false;  // a loss (lower is better), else an accuracy
  double margin = 0;
};
std::optional<HeldTarget> held_target(const ExperimentSpec& spec, const ExperimentCell& cell);
// A finished run's summary (the run in `dir`) as the experiment reads it. The first touch
// (no `held`): the summary as it is. "held": reached_target says whether the run holds the
// target, and the *_to_target fields (fresh, steps, seconds, wall seconds, raw reads) are
// those of the evaluation from which it does, absent when it never does. Throws (naming
// the file) when the run's evaluations cannot be read.
nlohmann::json summary_as_read(const std::string& dir, const nlohmann::json& summary,
                               const std::optional<HeldTarget>& held);

// The winner of a tuning group whose members `ids` have the tuning `states` (in the same
// order; null: none): the member whose chosen rate has the fewest median fresh examples,
// then the most runs at the target, then the one listed first; nullopt while a member has
// no chosen rate.
std::optional<std::string> group_winner(const std::vector<std::string>& ids,
                                        const std::vector<const TuningState*>& states);

// The plots of the report (experiment_plots.cc): PNG and SVG in spec.out/plots/ when
// gnuplot is there; report.plots and report.plot_note say what was drawn.
void make_plots(const ExperimentSpec& spec, ExperimentReport& report);

// Reads every cell's result files, aggregates over seeds, compares with the baselines,
// writes results.csv, results.json and the plots; `errors` are the failures of this sweep.
ExperimentReport collect(const ExperimentSpec& spec, const ExperimentOptions& options,
                         const std::map<std::string, std::vector<std::string>>& errors,
                         ExperimentReport report);

}  // namespace dataecho::train::detail
