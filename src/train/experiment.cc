// The rule that derives each cell's training pipeline, and the sweep itself (sequential
// runs, a result file per run, resume by skipping finished runs). Reading the experiment
// spec: experiment_spec.cc; the results: experiment_report.cc and experiment_plots.cc.
#include "dataecho/train/experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "dataecho/core/error.h"
#include "dataecho/core/file_io.h"
#include "dataecho/core/redact.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/spec_reader.h"
#include "dataecho/train/trainer.h"
#include "experiment_internal.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStage = "experiment";

using detail::experiment_error;

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string fmt_duration(double s) {
  char b[64];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s) / 3600,
                  (static_cast<int>(s) % 3600) / 60);
  return b;
}

}  // namespace

nlohmann::json derive_cell_spec(const nlohmann::json& base_train_spec, const ExperimentCell& cell) {
  return derive_cell_def(PipelineDef::from_json(base_train_spec), cell).to_json();
}

namespace {

// The index at which a cell's example echo is inserted into `base`'s stages, given its
// batch stage's index: right before or after the cell's echo_around stage, or else its
// augmentation map (found by what the map functions declare, MapFnTraits, not by their
// names; a map that decodes and augments at once allows only "after").
size_t example_echo_at(const PipelineDef& base, const ExperimentCell& cell, EchoVariant place,
                       size_t batch) {
  const auto& stages = base.stages();
  const bool before = place == EchoVariant::kExampleBeforeAugmentation;
  if (!cell.echo_around.empty()) {
    const std::optional<size_t> around = base.find(cell.echo_around);
    if (!around)
      experiment_error("cell " + cell.id + ": the training spec has no " + cell.echo_around +
                       " stage to echo around ($.echo_around)");
    if (*around > batch)
      experiment_error("cell " + cell.id + ": the " + cell.echo_around +
                       " stage comes after the batch stage; cannot place an example echo there");
    return before ? *around : *around + 1;
  }
  const Registry& reg = registry();
  std::optional<size_t> augment, fused;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].op != "map") continue;
    const MapFnTraits t = reg.traits_of(stages[i].fn());
    if (!t.augmentation) continue;
    if (!t.decodes && !augment) augment = i;
    if (t.decodes && !fused) fused = i;
  }
  size_t at = 0;
  if (before) {
    if (fused && (!augment || *fused < *augment))
      experiment_error("cell " + cell.id +
                       ": cannot echo before augmentation: the spec decodes and augments in "
                       "one map (" +
                       stages[*fused].fn() + " at $.stages[" + std::to_string(*fused) +
                       "]); split it into decode_image and augment");
    at = augment ? *augment : batch;
  } else {
    std::optional<size_t> a = augment;
    if (fused && (!a || *fused < *a)) a = fused;
    at = a ? *a + 1 : batch;
  }
  if (at > batch)
    experiment_error("cell " + cell.id +
                     ": the augment map comes after the batch stage; "
                     "cannot place an example echo there");
  return at;
}

}  // namespace

PipelineDef derive_cell_def(const PipelineDef& base, const ExperimentCell& cell) {
  if (!base.lists_stages())
    experiment_error("cell " + cell.id + ": the training spec has no \"stages\" list");
  PipelineDef def = base;
  const auto& stages = base.stages();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].op == "echo")
      experiment_error("cell " + cell.id +
                       ": the base training spec already has an echo stage "
                       "($.stages[" +
                       std::to_string(i) + "]); the experiment inserts its own");
  }
  std::optional<size_t> batch;
  for (const char* op : {"batch", "padded_batch", "bucket"}) {
    const std::optional<size_t> at = base.find(op);
    if (at && (!batch || *at < *batch)) batch = at;
  }
  if (!batch)
    experiment_error("cell " + cell.id +
                     ": the training spec has no batch stage (batch, padded_batch or bucket)");
  if (cell.batch_size > 0) {
    if (stages[*batch].op == "bucket")
      experiment_error("cell " + cell.id +
                       ": a batch size for a bucket stage: bucket takes one per bucket, set "
                       "them in the training spec");
    def = def.with_option(*batch, "size", cell.batch_size);
  }
  if (cell.variant == EchoVariant::kBaseline) return def;

  const EchoVariant place =
      cell.variant == EchoVariant::kAdaptive ? cell.adaptive_placement : cell.variant;
  EchoStageOptions echo;
  if (cell.variant == EchoVariant::kAdaptive) {
    echo.adaptive = true;
    echo.autotune = cell.adaptive_auto;
    echo.max_factor = cell.factor;
  } else {
    echo.factor = cell.factor;
  }
  PipelineDef echo_def;
  echo_def.echo(echo);
  if (place != EchoVariant::kBatch && cell.shuffle_after_echo > 0)
    echo_def.shuffle({.buffer = cell.shuffle_after_echo});
  const size_t at =
      place == EchoVariant::kBatch ? *batch + 1 : example_echo_at(base, cell, place, *batch);
  return def.inserting(at, echo_def.stages());
}

namespace detail {

std::string run_dir(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed) {
  fs::path dir = fs::path(spec.out) / "cells" / cell.id;
  if (cell.tuning_run) dir /= fs::path("tune") / ("lr-" + num(cell.lr.value_or(0)));
  return (dir / ("seed-" + std::to_string(seed))).string();
}

// A data service source's job named per run (its name, then the run's folder under the
// experiment's out): every run has a job of its own, since another seed is another
// upstream, which a job of the same name refuses, and no run reads an epoch another began.
static PipelineDef per_run_service_job(const PipelineDef& def, const ExperimentSpec& spec,
                                       const std::string& out) {
  if (def.source_kind() != "service") return def;
  const nlohmann::json source = def.to_json().value("source", nlohmann::json::object());
  const std::string run = fs::path(out).lexically_relative(spec.out).generic_string();
  return def.with_source_option("job", source.value("job", "") + "/" + run);
}

// The cell's TrainConfig for one seed, and the JSON that identifies it (compared with a
// finished run's to decide whether it can be skipped).
TrainConfig cell_config(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                        const ExperimentOptions& options, nlohmann::json* identity) {
  nlohmann::json cfg = spec.base_config;
  if (!cell.overrides.is_null()) cfg.merge_patch(cell.overrides);
  if (cell.lr) cfg["optimizer"]["lr"] = *cell.lr;
  TrainConfig c = train_config_from_json(cfg, spec.base_dir);
  if (!c.train_spec) experiment_error("cell " + cell.id + ": the base config has no train_spec");
  c.train_spec = derive_cell_def(*c.train_spec, cell);
  c.seed = seed;
  c.out = run_dir(spec, cell, seed);
  c.train_spec = per_run_service_job(*c.train_spec, spec, c.out);
  c.resume = false;
  if (!options.progress.empty()) c.progress = options.progress;
  if (options.threads) c.threads = *options.threads;
  if (identity) {
    nlohmann::json id = train_config_to_json(c);
    for (const char* k : {"out", "progress", "progress_seconds", "threads", "resume"}) id.erase(k);
    *identity = id;
  }
  return c;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  // No credentials in a run's files.
  write_file_atomically(path, redact_json_urls(j).dump(2) + "\n", kStage);
}

}  // namespace detail

namespace {

enum class RunOutcome { kTrained, kFailed, kInterrupted, kDryRun };

std::string load_average() {  // "0.52 0.58 0.59": 1, 5 and 15 minutes
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? a + " " + b + " " + c : "";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

// Where and when a run ran: the commit (DATAECHO_COMMIT, which the experiment scripts
// set from git), the machine's size and its load before and after the run.
nlohmann::json provenance(const std::string& load_before, const std::string& started) {
  const char* commit = std::getenv("DATAECHO_COMMIT");
  return {{"commit", commit && *commit ? commit : "unknown (set DATAECHO_COMMIT)"},
          {"started", started},
          {"finished", utc_now()},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"load_average_before", load_before},
          {"load_average_after", load_average()}};
}

// Trains one run of `cell` (the cell's config for `seed`) and writes its result.json.
// A failure is logged and returned in `error`; the sweep goes on.
RunOutcome train_run(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                     const ExperimentOptions& options,
                     const std::function<void(const std::string&)>& log, std::string* error) {
  try {
    nlohmann::json identity;
    TrainConfig c = detail::cell_config(spec, cell, seed, options, &identity);
    validate_train_config(c);
    if (options.dry_run) {
      log("  dry run: " + c.train_spec->stages_to_json().dump() +
          (cell.lr ? " lr " + num(*cell.lr) : ""));
      return RunOutcome::kDryRun;
    }
    fs::remove_all(c.out);  // a stale, unfinished run starts over
    const std::string dir = c.out;
    const std::string load_before = load_average(), started = utc_now();
    Trainer trainer(std::move(c));
    std::jthread watcher;
    if (options.stop) {
      watcher = std::jthread([&trainer, stop = options.stop](std::stop_token st) {
        while (!st.stop_requested()) {
          if (stop->load()) trainer.request_stop();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
    }
    TrainResult r = trainer.run();
    if (watcher.joinable()) {
      watcher.request_stop();
      watcher.join();
    }
    if (r.stop_reason == "interrupted") {
      log("  interrupted: this run is not recorded; rerun the experiment to resume");
      return RunOutcome::kInterrupted;
    }
    nlohmann::json summary = r.to_json();
    summary.erase("pipeline_stats");  // in summary.json; keep result files small
    detail::write_json_file((fs::path(dir) / "result.json").string(),
                            {{"cell", cell.id},
                             {"seed", seed},
                             {"config", identity},
                             {"provenance", provenance(load_before, started)},
                             {"summary", summary}});
    char line[512];
    if (r.reached_target) {
      std::snprintf(line, sizeof line,
                    "  target after %lld fresh, %lld steps, %.1f s training (%.1f s wall) | "
                    "achieved echo %.2f | R %.2f",
                    static_cast<long long>(*r.fresh_to_target),
                    static_cast<long long>(*r.steps_to_target), *r.seconds_to_target,
                    *r.wall_seconds_to_target, r.achieved_echo, r.r_estimate);
    } else {
      std::snprintf(line, sizeof line,
                    "  no target (%s) after %lld fresh, %lld steps, accuracy %.4f | achieved "
                    "echo %.2f | R %.2f",
                    r.stop_reason.c_str(), static_cast<long long>(r.fresh),
                    static_cast<long long>(r.steps), r.final_eval ? r.final_eval->accuracy : 0.0,
                    r.achieved_echo, r.r_estimate);
    }
    log(line);
    return RunOutcome::kTrained;
  } catch (const std::exception& e) {
    *error = "seed " + std::to_string(seed) +
             (cell.tuning_run ? " (tuning, lr " + num(*cell.lr) + ")" : "") + ": " + e.what();
    log(std::string("  FAILED (the sweep goes on): ") + e.what());
    return RunOutcome::kFailed;
  }
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// One sweep of run_experiment, in its steps: a cell's learning rate from its tuning runs
// (with tuning), then its final runs, cell by cell; whatever is done already (the same
// config) is skipped. One cell is complete before the next starts, so a sweep stopped
// part-way has whole cells to report.
class Sweep {
 public:
  Sweep(ExperimentSpec& spec, const ExperimentOptions& options,
        std::function<void(const std::string&)> log)
      : spec_(spec), options_(options), log_(std::move(log)) {
    for (size_t i = 0; i < spec_.cells.size(); ++i) {
      pending_.push_back(expected_pending(i));
      final_left_ += pending_.back();
    }
    total_ = final_run_count(spec_);
  }

  ExperimentReport run() {
    for (size_t i = 0; i < spec_.cells.size() && !report_.interrupted; ++i) {
      const bool untunable = !tune(i) || !chosen_in_group(i);
      if (report_.interrupted) break;
      if (untunable || options_.tune_only) {
        final_left_ -= pending_[i];
        continue;
      }
      run_final(i);
    }
    if (skipped_ > 0)
      log_("experiment " + spec_.name + ": " + std::to_string(skipped_) + " runs already done in " +
           spec_.out + " (skipped)");
    const bool interrupted = report_.interrupted;
    ExperimentReport report = detail::collect(spec_, options_, errors_, std::move(report_));
    report.interrupted = interrupted;
    report.runs_total = total_;
    report.runs_trained = trained_;
    report.runs_skipped = skipped_;
    report.runs_failed = failed_;
    return report;
  }

 private:
  // The final runs of cell i that this sweep expects to train, before it trains any: the
  // seeds without a finished run at the rate the cell's tuning has chosen (all of them while
  // it has not chosen one); 0 for a member of a tuning group that another member has won,
  // and a group still tuning counts its runs once, at its first member. run_final corrects
  // the figure when it reaches the cell, so the progress line counts only the runs left.
  int64_t expected_pending(size_t i) const {
    const ExperimentCell& cell = spec_.cells[i];
    const auto all = static_cast<int64_t>(cell.seeds.size());
    const std::string group = tuning_group_of(spec_, cell.id);
    if (!group.empty()) {
      const std::optional<std::string> winner = tuning_group_winner(spec_, group);
      if (winner && *winner != cell.id) return 0;
      if (!winner) {
        for (size_t j = 0; j < i; ++j)
          if (tuning_group_of(spec_, spec_.cells[j].id) == group) return 0;
        int64_t most = 0;
        for (const auto& c : spec_.cells)
          if (tuning_group_of(spec_, c.id) == group)
            most = std::max(most, static_cast<int64_t>(c.seeds.size()));
        return most;
      }
    }
    ExperimentCell at = cell;
    if (spec_.tuning.enabled() || spec_.tuning.from) {
      const TuningState st = tuning_state(spec_, cell);
      if (!st.chosen) return all;
      at.lr = *st.chosen;
    }
    int64_t left = 0;
    for (uint64_t seed : at.seeds)
      left += detail::finished_summary(spec_, at, seed).is_object() ? 0 : 1;
    return left;
  }

  std::string eta(int64_t left) const {
    if (trained_ == 0) return "ETA ?";
    return "ETA " + fmt_duration(trained_seconds_ / static_cast<double>(trained_) *
                                 static_cast<double>(left));
  }

  std::string tune_head(size_t i) const {  // "[tune 2/14] before_aug-e4-sb1000"
    return "[tune " + std::to_string(i + 1) + "/" + std::to_string(spec_.cells.size()) + "] " +
           spec_.cells[i].id;
  }

  // Trains one run (unless stopped) and counts it.
  RunOutcome train(const ExperimentCell& cell, uint64_t seed, const std::string& cell_id) {
    const auto t0 = Clock::now();
    std::string error;
    const RunOutcome o = train_run(spec_, cell, seed, options_, log_, &error);
    if (o == RunOutcome::kTrained) {
      trained_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
      ++trained_;
    } else if (o == RunOutcome::kFailed) {
      ++failed_;
      errors_[cell_id].push_back(error);
    } else if (o == RunOutcome::kInterrupted) {
      report_.interrupted = true;
    }
    return o;
  }

  bool stop_requested() {
    if (options_.stop && options_.stop->load()) report_.interrupted = true;
    return report_.interrupted;
  }

  // The tuning runs of the learning rates still pending; false when one failed.
  bool run_pending(size_t i, const TuningState& st) {
    const ExperimentCell& cell = spec_.cells[i];
    bool broken = false;
    for (double lr : st.pending) {
      const ExperimentCell tc = detail::tuning_cell(cell, lr);
      for (uint64_t seed : spec_.tuning.seeds) {
        if (detail::finished_summary(spec_, tc, seed).is_object()) {
          ++skipped_;
          continue;
        }
        if (stop_requested()) break;
        log_(tune_head(i) + " lr " + num(lr) + " seed " + std::to_string(seed));
        broken = train(tc, seed, cell.id) == RunOutcome::kFailed || broken;
      }
      if (report_.interrupted || broken) break;
    }
    return !broken;
  }

  // Cell i's learning rate, from its tuning runs (run here as needed); false when it has
  // none (a config that cannot train: its final runs cannot either).
  bool tune(size_t i) {
    ExperimentCell& cell = spec_.cells[i];
    while (spec_.tuning.enabled() || spec_.tuning.from) {
      TuningState st = tuning_state(spec_, cell);
      if (st.chosen) {
        cell.lr = st.chosen;
        log_(tune_head(i) + ": learning rate " + num(*st.chosen) +
             (st.note.empty() ? "" : " (" + st.note + ")"));
        return true;
      }
      if (st.pending.empty() || options_.dry_run) {
        if (!st.note.empty()) errors_[cell.id].push_back("tuning: " + st.note);
        for (double lr : st.pending) log_(tune_head(i) + " lr " + num(lr) + ": to run");
        return false;
      }
      if (!run_pending(i, st)) return false;
      if (report_.interrupted) return true;
    }
    return true;
  }

  // Whether cell i runs its final seeds as far as its tuning group goes: every member of
  // the group is tuned first (their tuning runs, here as needed), then only the winner
  // runs. True for a cell in no group.
  bool chosen_in_group(size_t i) {
    const std::string group = tuning_group_of(spec_, spec_.cells[i].id);
    if (group.empty()) return true;
    for (size_t j = 0; j < spec_.cells.size() && !report_.interrupted; ++j)
      if (j != i && tuning_group_of(spec_, spec_.cells[j].id) == group) tune(j);
    if (report_.interrupted) return false;
    const std::optional<std::string> winner = tuning_group_winner(spec_, group);
    if (!winner) {
      log_(tune_head(i) + ": tuning group " + group + " has not chosen yet: no final runs");
      return false;
    }
    if (*winner != spec_.cells[i].id) {
      log_(tune_head(i) + ": not chosen in tuning group " + group + " (" + *winner +
           " is): no final runs");
      return false;
    }
    return true;
  }

  // Cell i's final runs, one per seed.
  void run_final(size_t i) {
    const ExperimentCell& cell = spec_.cells[i];
    std::vector<uint64_t> to_run;
    for (uint64_t seed : cell.seeds) {
      if (detail::finished_summary(spec_, cell, seed).is_object())
        ++skipped_;
      else
        to_run.push_back(seed);
    }
    final_left_ += static_cast<int64_t>(to_run.size()) - pending_[i];
    for (uint64_t seed : to_run) {
      if (stop_requested()) break;
      ++final_index_;
      // This sweep's final runs: those run so far, this one and those left after it.
      const int64_t sweep_runs = final_index_ + final_left_ - 1;
      char head[512];
      std::snprintf(head, sizeof head,
                    "[cell %zu/%zu] %s seed %llu | run %lld/%lld of this sweep | %s", i + 1,
                    spec_.cells.size(), cell.id.c_str(), static_cast<unsigned long long>(seed),
                    static_cast<long long>(final_index_), static_cast<long long>(sweep_runs),
                    eta(final_left_).c_str());
      --final_left_;
      log_(head);
      train(cell, seed, cell.id);
    }
  }

  ExperimentSpec& spec_;
  const ExperimentOptions& options_;
  std::function<void(const std::string&)> log_;
  ExperimentReport report_;
  std::map<std::string, std::vector<std::string>> errors_;  // cell id -> messages
  double trained_seconds_ = 0;
  int64_t total_ = 0, trained_ = 0, failed_ = 0, skipped_ = 0;
  int64_t final_left_ = 0, final_index_ = 0;
  std::vector<int64_t> pending_;  // expected_pending of each cell
};

}  // namespace

ExperimentReport run_experiment(const ExperimentSpec& spec_in, const ExperimentOptions& options) {
  auto log = options.log ? options.log : [](const std::string& s) { std::cerr << s << "\n"; };
  ExperimentSpec spec = spec_in;  // the cells get their tuned learning rates
  std::error_code ec;
  fs::create_directories(spec.out, ec);
  if (ec)
    throw Error(ErrorCode::kIo, kStage, "cannot create the output directory: " + ec.message(),
                spec.out);
  detail::write_json_file((fs::path(spec.out) / "experiment.json").string(), spec.source);
  return Sweep(spec, options, log).run();
}

ExperimentReport report_experiment(const ExperimentSpec& spec, const ExperimentOptions& options) {
  ExperimentReport report = detail::collect(spec, options, {}, ExperimentReport{});
  report.runs_total = final_run_count(spec);
  return report;
}

}  // namespace dataecho::train
