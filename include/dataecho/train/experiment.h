// The experiment runner behind `dataecho experiment`: a grid of training runs over echo
// variants, factors, shuffle buffers after the echo, batch sizes and seeds, derived from
// one base training config, run one after the other, with a result file per run so that
// an interrupted sweep resumes where it stopped. Writes results.csv / results.json (per
// cell: median, min and max over seeds of fresh examples, steps and time to target,
// achieved echo factor and R) and gnuplot plots. No LibTorch in this header.
// Thread-safety: plain functions; run_experiment() from one thread (stop may be set from
// any thread or a signal handler).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/run_statistics.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho::train {

// Where the echo stage goes (README, "Where to put the echo"; docs/results.md).
enum class EchoVariant {
  kBaseline,                   // no echo stage
  kExampleBeforeAugmentation,  // echo (+ shuffle) right before the augment map
  kExampleAfterAugmentation,   // echo (+ shuffle) right after the augment map
  kBatch,                      // echo right after the batch stage
  kAdaptive,                   // adaptive echo, placed as adaptive_placement says
};
const char* variant_name(EchoVariant v);  // "baseline", "example_before_augmentation", ...
EchoVariant variant_from_name(const std::string& name);  // throws for an unknown name

struct ExperimentCell {
  std::string id;  // directory name and table key: "before_aug-e2-sb1000-bs64"
  EchoVariant variant = EchoVariant::kBaseline;
  double factor = 1;               // fixed factor; for kAdaptive the max_factor
  int64_t shuffle_after_echo = 0;  // shuffle buffer after an example echo (0: none)
  int64_t batch_size = 0;          // 0: the base spec's
  // kAdaptive only: where the adaptive echo goes (one of the three fixed variants).
  EchoVariant adaptive_placement = EchoVariant::kExampleBeforeAugmentation;
  // kAdaptive: the echo's "factor" is "auto" (its cap tuned by the pipeline's tuner, or
  // set by a data service source's echo-or-scale policy: docs/echo.md) instead of
  // "adaptive"; the cell id starts "auto" ("auto-m4-sb1000").
  bool adaptive_auto = false;
  // The stage an example echo goes before or after, by its op ("pack": a language
  // model's token blocks); empty: the augmentation map (the spec's "echo_around").
  std::string echo_around;
  std::vector<uint64_t> seeds;
  // A merge patch on the base config for this cell only (extra "cells" of the spec).
  nlohmann::json overrides;
  // The learning rate (optimizer.lr); unset: the base config's. With tuning, the value
  // the tuning chose for the final runs.
  std::optional<double> lr;
  // A tuning run's cell: its runs live under cells/<id>/tune/lr-<lr>/seed-<s>/.
  bool tuning_run = false;
  // The rate is the cell's own (an extra cell's "lr"): the experiment's tuning leaves it.
  bool fixed_lr = false;
  // This cell's own tuning rates (an extra cell's "tuning_lr": a larger batch wants
  // larger rates); empty: the experiment's.
  std::vector<double> tuning_lrs;
};

// Per-cell learning-rate tuning, as the paper does it (docs/protocol.md): every cell,
// the baseline included, runs each rate with each tuning seed; the rate with the
// smallest median fresh examples to target wins (a run that misses the target counts at
// its budget); a winner at the edge of the list adds the next rate beyond it (same
// ratio as its neighbour) up to `widen` times, so the chosen rate is interior. The
// final runs (the grid's seeds, which must differ from the tuning seeds) use the winner.
struct ExperimentSpec;
struct TuningSpec {
  std::vector<double> lrs;      // sorted, log-spaced; empty: no tuning
  std::vector<uint64_t> seeds;  // tuning seeds
  int64_t widen = 2;
  bool enabled() const { return !lrs.empty(); }
  // Or ("from"): take each cell's rate from the tuning of another experiment (the
  // protocol's network runs use the sweep's rates), the cell of the same id there, or
  // the one `map` names for it.
  std::shared_ptr<const ExperimentSpec> from;
  std::map<std::string, std::string> map;
  // How a tuning run's fresh examples to target are read ("reading"): "first_touch", the
  // first evaluation at or above the target (the summary's fresh_to_target), or "held",
  // the first evaluation at or above the target from which no later evaluation of the
  // run falls below target - margin (the protocol's held reading, docs/protocol.md); for a
  // loss target (target_loss, with no target_accuracy), the first at or below it from which
  // none rises above target + margin. "held" reads every evaluation (evals.jsonl), so the
  // runs must go on past the target: the base config's eval_mode must be "snapshots".
  // With "from", a reading given here reads this experiment's own figures (the rates
  // still come from the other experiment, chosen its way); without one, the other's.
  std::string reading = "first_touch";
  double margin = 0;           // "held" only: accuracy as a fraction (0.0104: 1.04 points), or nats
  bool reading_given = false;  // "reading" was in the spec
  // Groups of cells that choose together ("groups": {"name": [cell ids]}), such as one
  // variant under several weight decays: each member tunes its rate as above, the member
  // whose chosen rate has the smallest median wins (ties: more runs at the target, then
  // the one listed first), and only the winner runs its final seeds; the others are
  // reported as "not_chosen" with their tuning.
  std::map<std::string, std::vector<std::string>> groups;
};

// The index of the evaluation at which a run holds `target` (TuningSpec::reading "held"):
// the first with accuracy >= target from which no later one is below target - margin;
// nullopt when there is none.
std::optional<size_t> held_index(const std::vector<double>& accuracy, double target, double margin);
// The same for a loss target: the first evaluation with loss <= target from which no later
// one is above target + margin (a NaN loss counts as above).
std::optional<size_t> held_index_of_loss(const std::vector<double>& loss, double target,
                                         double margin);

// One cell's tuning, as far as the result files on disk go.
struct LrTrial {
  double lr = 0;
  int64_t runs = 0;  // finished tuning runs at this rate
  int64_t reached = 0;
  std::optional<MedianEstimate> fresh;  // over the finished runs, censored at the budget
  nlohmann::json to_json() const;
};
struct TuningState {
  std::vector<LrTrial> trials;          // every rate tried or to try, ascending
  std::vector<double> pending;          // rates whose tuning runs are not all finished
  std::optional<double> chosen;         // set once every run is in and the winner is interior
  std::string note;                     // why the winner is at an edge, when it is
  std::string reading = "first_touch";  // how its fresh examples were read (TuningSpec)
  nlohmann::json to_json() const;
};

struct ExperimentSpec {
  std::string name;
  nlohmann::json base_config;  // a TrainConfig object (docs/train.md), overrides applied
  std::string base_dir;        // relative spec names in base_config are relative to it
  std::string out;             // output directory
  std::vector<ExperimentCell> cells;
  TuningSpec tuning;
  nlohmann::json source;  // the experiment spec as read (saved as experiment.json)
};

// The tuning of one cell from the result files in spec.out (trains nothing). With
// "tuning": {"from": ...}, the tuning of the other experiment's cell (nothing pending:
// that experiment runs its own tuning).
TuningState tuning_state(const ExperimentSpec& spec, const ExperimentCell& cell);

// The group (TuningSpec::groups) that `cell_id` belongs to, or "" when none.
std::string tuning_group_of(const ExperimentSpec& spec, const std::string& cell_id);
// The id of a group's winner once every member's rate is chosen; nullopt before that.
std::optional<std::string> tuning_group_winner(const ExperimentSpec& spec,
                                               const std::string& group);
// The final runs the experiment makes: every cell's seeds, a tuning group's once (only
// its winner runs them). Tuning runs come on top.
int64_t final_run_count(const ExperimentSpec& spec);

// Reads an experiment spec (docs/results.md, "Experiment spec"). Paths in it are
// relative to `base_dir` (the spec file's folder), except "out", relative to the current
// directory. Errors name the JSON path: "experiment: $.grid.factors[1]: ...".
ExperimentSpec experiment_spec_from_json(const nlohmann::json& json, const std::string& base_dir);
ExperimentSpec load_experiment_spec(const std::string& path);

// The training pipeline spec of one cell: the base spec with the batch size set and the
// echo (and shuffle-after-echo) stages inserted at the variant's place. Augmentation maps
// are found by their functions' traits (MapFnTraits: augment is one, decode_augment one
// that also decodes). The batch stage is the first `batch`, `padded_batch` or `bucket`.
// With cell.echo_around set (an op, such as "pack"), example echoes go right before or
// right after the first stage of that op instead of the augmentation map, and that stage
// must come before the batch stage. The rule:
//   example_before_augmentation: right before the first augmentation map (before the batch
//     stage when there is none); refused when augmentation is fused with decoding
//     (decode_augment);
//   example_after_augmentation: right after the first augmentation map
//     (before the batch stage when there is none);
//   batch: right after the first batch stage (no shuffle after it);
//   adaptive: {"factor": "adaptive" (or "auto"), "max_factor": factor} at adaptive_placement.
// A base spec that already has an echo stage, or no batch stage, is refused.
nlohmann::json derive_cell_spec(const nlohmann::json& base_train_spec, const ExperimentCell& cell);
// The same on a PipelineDef: the cell's definition (derive_cell_spec is this on the
// parsed spec, written back as JSON).
PipelineDef derive_cell_def(const PipelineDef& base, const ExperimentCell& cell);

// Median, min and max of the values over the seeds that reached the target.
struct Spread {
  std::optional<double> median, min, max;
  nlohmann::json to_json() const;
};
Spread spread_of(std::vector<double> values);

struct CellResult {
  ExperimentCell cell;
  // "done", "partial" (some seeds failed), "failed", "not_run", or "not_chosen" (another
  // cell of its tuning group won: no final runs)
  std::string status;
  std::vector<std::string> errors;   // "seed 2: ..." for each failed run
  std::vector<nlohmann::json> runs;  // each finished run's result.json
  int64_t reached = 0;               // runs that reached the target
  Spread fresh, steps, seconds, wall_seconds, achieved_echo, r;
  Spread raw_reads;         // the source's reads to target (read-ahead included)
  Spread steps_per_second;  // training steps per second (start-up included)
  // The final evaluation's validation accuracy and loss, at the run's budget.
  Spread final_accuracy, final_loss;
  // C (the protocol's CPU cap, docs/protocol.md): this cell's median steps per second over
  // its baseline's, in the same (unthrottled) sweep: below 1, the CPU holds the cell back.
  std::optional<double> cpu_cap;
  // The protocol's estimates (docs/protocol.md): every run counts, one that never
  // reached the target at its budget (censored); 95% percentile-bootstrap intervals.
  std::optional<MedianEstimate> fresh_estimate, wall_estimate;
  // Against the baseline cell of the same batch size (when both have figures):
  std::optional<double> fresh_reduction;  // baseline fresh / this cell's fresh
  std::optional<double> speedup;          // baseline wall seconds to target / this cell's
  std::optional<double> ideal_speedup;    // min(achieved echo, baseline R)
  std::optional<RatioEstimate> fresh_reduction_estimate, speedup_estimate;
  // Against its control (the protocol's second-shuffle control, docs/protocol.md): for an
  // example-echo cell with a shuffle after the echo, the cell that echoes at e = 1 (the
  // identity) with the same shuffle, batch size and no overrides, when the experiment has
  // one: how much of the reduction is left once the baseline gets the same second shuffle.
  std::string control;  // its id, or "" when there is none
  std::optional<RatioEstimate> fresh_reduction_vs_control;
  std::vector<Observation> fresh_observations, wall_observations;  // one per run
  std::optional<TuningState> tuning;                               // when the experiment tunes
  // Where the experiment reads "held" (TuningSpec::reading), every figure above is read by
  // that rule, and the same runs read by their first touch are given beside them.
  struct FirstTouch {
    int64_t reached = 0;
    Spread fresh;
    std::vector<Observation> fresh_observations, wall_observations;
    std::optional<RatioEstimate> fresh_reduction, speedup;  // against the baseline's
    nlohmann::json to_json() const;
  };
  std::optional<FirstTouch> first_touch;
  nlohmann::json to_json() const;
};

struct ExperimentOptions {
  bool plots = true;     // run gnuplot (skipped with a note when it is missing)
  std::string progress;  // the trainer's progress line (TrainConfig::progress); "": the config's
  std::optional<int> threads;  // overrides the base config's LibTorch threads
  bool dry_run = false;        // derive and validate every cell, train nothing
  // Tune every cell's learning rate, run no final seed: for final runs that need another
  // setup (another machine, a shaped link), run later from a spec whose tuning is "from"
  // this one.
  bool tune_only = false;
  std::atomic<bool>* stop = nullptr;  // set to end the sweep after the current step
  // Progress lines ("[cell 3/8] ..."); default: standard error.
  std::function<void(const std::string&)> log;
};

struct ExperimentReport {
  std::vector<CellResult> cells;
  int64_t runs_total = 0, runs_trained = 0, runs_skipped = 0, runs_failed = 0;
  bool interrupted = false;
  std::string csv_path, json_path;
  std::vector<std::string> plots;  // files written
  std::string plot_note;           // why plots were not drawn, if they were not
  // How the figures read "reaching the target" (TuningSpec::reading): "first_touch" or
  // "held" (with its margin; the first touch is then given beside).
  std::string reading = "first_touch";
  double margin = 0;
  std::string to_text() const;  // the results table, for a terminal
};

// Runs every cell x seed not already done (out/cells/<cell>/seed-<s>/result.json with the
// same derived config), then writes the table and the plots. A run that fails (bad spec,
// training error) is reported in its cell and the sweep goes on.
ExperimentReport run_experiment(const ExperimentSpec& spec, const ExperimentOptions& options);

// The table and plots from whatever result files are in spec.out (no training).
ExperimentReport report_experiment(const ExperimentSpec& spec, const ExperimentOptions& options);

}  // namespace dataecho::train
