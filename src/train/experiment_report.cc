// The results of a sweep: per-cell aggregation over seeds, comparison with the baseline,
// results.csv / results.json and the text table. The plots: experiment_plots.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "dataecho/core/error.h"
#include "experiment_internal.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStage = "experiment";

std::optional<double> opt_number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// An estimate's JSON (MedianEstimate, RatioEstimate), or null.
template <typename Estimate>
nlohmann::json opt_estimate_json(const std::optional<Estimate>& e) {
  return e ? e->to_json() : nlohmann::json(nullptr);
}

std::string fmt(const std::optional<double>& v, const char* f = "%.4g") {
  if (!v) return "";
  char b[64];
  std::snprintf(b, sizeof b, f, *v);
  return b;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string spread_text(const Spread& s, const char* f) {
  if (!s.median) return "-";
  std::string t = fmt(s.median, f);
  if (s.min != s.max) t += " [" + fmt(s.min, f) + "-" + fmt(s.max, f) + "]";
  return t;
}

// The cell a figure is compared with: the baseline of the same batch size.
const CellResult* baseline_for(const std::vector<CellResult>& cells, const CellResult& c) {
  const CellResult* any = nullptr;
  for (const auto& b : cells) {
    if (b.cell.variant != EchoVariant::kBaseline || !b.cell.overrides.is_null()) continue;
    if (b.cell.batch_size == c.cell.batch_size) return &b;
    if (!any) any = &b;
  }
  return any;
}

// The control of an example-echo cell with a shuffle after its echo (the protocol's
// second-shuffle control, docs/protocol.md): the cell that echoes at e = 1 before
// augmentation with the same shuffle and batch size, no overrides. nullptr when there is none.
const CellResult* control_for(const std::vector<CellResult>& cells, const CellResult& c) {
  const ExperimentCell& x = c.cell;
  const bool example = x.variant == EchoVariant::kExampleBeforeAugmentation ||
                       x.variant == EchoVariant::kExampleAfterAugmentation;
  if (!example || x.factor == 1 || x.shuffle_after_echo <= 0) return nullptr;
  for (const auto& k : cells) {
    const ExperimentCell& y = k.cell;
    if (y.variant == EchoVariant::kExampleBeforeAugmentation && y.factor == 1 &&
        y.shuffle_after_echo == x.shuffle_after_echo && y.batch_size == x.batch_size &&
        y.overrides.is_null())
      return &k;
  }
  return nullptr;
}

}  // namespace

nlohmann::json Spread::to_json() const {
  return {{"median", opt_json(median)}, {"min", opt_json(min)}, {"max", opt_json(max)}};
}

Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

nlohmann::json CellResult::to_json() const {
  nlohmann::json j = {{"cell", cell.id},
                      {"variant", variant_name(cell.variant)},
                      {"factor", cell.factor},
                      {"shuffle_after_echo", cell.shuffle_after_echo},
                      {"batch_size", cell.batch_size},
                      {"seeds", cell.seeds},
                      {"status", status},
                      {"runs", runs.size()},
                      {"reached", reached},
                      {"fresh_to_target", fresh.to_json()},
                      {"steps_to_target", steps.to_json()},
                      {"seconds_to_target", seconds.to_json()},
                      {"wall_seconds_to_target", wall_seconds.to_json()},
                      {"achieved_echo", achieved_echo.to_json()},
                      {"r_estimate", r.to_json()},
                      {"raw_reads_to_target", raw_reads.to_json()},
                      {"steps_per_second", steps_per_second.to_json()},
                      {"final_accuracy", final_accuracy.to_json()},
                      {"final_loss", final_loss.to_json()},
                      {"cpu_cap", opt_json(cpu_cap)},
                      {"fresh_reduction", opt_json(fresh_reduction)},
                      {"speedup", opt_json(speedup)},
                      {"ideal_speedup", opt_json(ideal_speedup)},
                      {"errors", errors}};
  j["estimates"] = {{"fresh_to_target", opt_estimate_json(fresh_estimate)},
                    {"wall_seconds_to_target", opt_estimate_json(wall_estimate)},
                    {"fresh_reduction", opt_estimate_json(fresh_reduction_estimate)},
                    {"speedup", opt_estimate_json(speedup_estimate)},
                    {"method",
                     "median over seeds; runs that never reached the target count at their "
                     "budget (censored); 95% percentile bootstrap, 10,000 resamples, fixed "
                     "seed; ratios resample baseline and cell independently"}};
  if (!control.empty()) {  // only where a control exists: other reports are unchanged
    j["control"] = control;
    j["estimates"]["fresh_reduction_vs_control"] = opt_estimate_json(fresh_reduction_vs_control);
  }
  if (cell.variant == EchoVariant::kAdaptive) {
    j["adaptive_placement"] = variant_name(cell.adaptive_placement);
    j["adaptive_factor"] = cell.adaptive_auto ? "auto" : "adaptive";
  }
  j["lr"] = cell.lr ? nlohmann::json(*cell.lr) : nlohmann::json(nullptr);
  if (tuning) j["tuning"] = tuning->to_json();
  if (first_touch) j["first_touch"] = first_touch->to_json();
  if (!cell.overrides.is_null()) j["overrides"] = cell.overrides;
  return j;
}

nlohmann::json CellResult::FirstTouch::to_json() const {
  return {{"reached", reached},
          {"fresh_to_target", fresh.to_json()},
          {"estimates",
           {{"fresh_reduction", opt_estimate_json(fresh_reduction)},
            {"speedup", opt_estimate_json(speedup)}}}};
}

static std::string ratio_text(const std::optional<RatioEstimate>& e) {
  if (!e) return "-";
  char b[96];
  std::snprintf(b, sizeof b, "%s%.2fx [%.2f-%.2f]", e->censored ? "~" : "", e->ratio, e->ci.lo,
                e->ci.hi);
  return b;
}

namespace {

// The table's blocks below the main one (ExperimentReport::to_text).

// Each example-echo cell against its second-shuffle control, where the experiment has one.
void write_controls(std::ostream& o, const std::vector<CellResult>& cells) {
  bool controlled = false;
  for (const auto& c : cells) controlled = controlled || !c.control.empty();
  if (!controlled) return;
  o << "against the control (the baseline with the same second shuffle, docs/protocol.md; "
       "added after the results it checks): "
       "control fresh / this cell's, median ratio [95% interval]:\n";
  for (const auto& c : cells) {
    if (c.control.empty()) continue;
    o << "  " << c.cell.id << " vs " << c.control << ": "
      << ratio_text(c.fresh_reduction_vs_control) << " (vs baseline "
      << ratio_text(c.fresh_reduction_estimate) << ")\n";
  }
}

// Under the "held" reading, the same runs read by their first touch.
void write_first_touch(std::ostream& o, const std::vector<CellResult>& cells, double margin) {
  char line[512];
  std::snprintf(line, sizeof line,
                "read by the first touch instead (the first evaluation at the target; the "
                "figures above read \"held\", margin %g): reached, fresh to target, fresh/, "
                "speedup:\n",
                margin);
  o << line;
  for (const auto& c : cells) {
    if (!c.first_touch) continue;
    const auto& f = *c.first_touch;
    const std::string reached =
        std::to_string(f.reached) + "/" + std::to_string(c.cell.seeds.size());
    std::snprintf(line, sizeof line, "  %-32s %-7s %-26s %-20s %s\n", c.cell.id.c_str(),
                  reached.c_str(), spread_text(f.fresh, "%.0f").c_str(),
                  ratio_text(f.fresh_reduction).c_str(), ratio_text(f.speedup).c_str());
    o << line;
  }
}

// Each cell's final evaluation, at its budget.
void write_final_evaluations(std::ostream& o, const std::vector<CellResult>& cells) {
  o << "at the budget (the final evaluation): validation accuracy, loss:\n";
  for (const auto& c : cells) {
    if (c.runs.empty()) continue;
    char line[512];
    std::snprintf(line, sizeof line, "  %-32s %-26s %s\n", c.cell.id.c_str(),
                  spread_text(c.final_accuracy, "%.4f").c_str(),
                  spread_text(c.final_loss, "%.4f").c_str());
    o << line;
  }
}

// Each tuned cell's rates: median fresh examples to target, runs at the target, the choice.
void write_tuning(std::ostream& o, const std::vector<CellResult>& cells) {
  const TuningState* tuned = nullptr;
  for (const auto& c : cells)
    if (c.tuning && !tuned) tuned = &*c.tuning;
  if (!tuned) return;
  o << "learning-rate tuning (median fresh examples to "
    << (tuned->reading == "held" ? "hold the target" : "target")
    << " over the tuning seeds, reached/runs; * chosen):\n";
  for (const auto& c : cells) {
    if (!c.tuning) continue;
    o << "  " << c.cell.id << ":";
    for (const auto& t : c.tuning->trials) {
      char b[128];
      std::snprintf(b, sizeof b, " %g%s %s (%lld/%lld)", t.lr,
                    c.tuning->chosen && *c.tuning->chosen == t.lr ? "*" : "",
                    t.fresh ? (std::string(t.fresh->median_censored ? ">=" : "") +
                               fmt(t.fresh->median, "%.0f"))
                                  .c_str()
                            : "-",
                    static_cast<long long>(t.reached), static_cast<long long>(t.runs));
      o << b;
    }
    if (!c.tuning->note.empty()) o << " | " << c.tuning->note;
    o << "\n";
  }
}

}  // namespace

std::string ExperimentReport::to_text() const {
  std::ostringstream o;
  char line[1024];
  // One format for the header and the rows, so that the columns line up.
  static constexpr const char* kRow =
      "%-34s %-7s %-26s %-22s %-22s %-22s %-16s %-16s %-20s %-20s %-6s\n";
  std::snprintf(line, sizeof line, kRow, "cell", "reached", "fresh to target", "steps to target",
                "s to target (wall)", "s to target (train)", "achieved echo", "R", "fresh/",
                "speedup", "ideal");
  o << line;
  for (const auto& c : cells) {
    const std::string reached =
        std::to_string(c.reached) + "/" + std::to_string(c.cell.seeds.size());
    std::snprintf(
        line, sizeof line, kRow, c.cell.id.c_str(), reached.c_str(),
        spread_text(c.fresh, "%.0f").c_str(), spread_text(c.steps, "%.0f").c_str(),
        spread_text(c.wall_seconds, "%.1f").c_str(), spread_text(c.seconds, "%.1f").c_str(),
        spread_text(c.achieved_echo, "%.2f").c_str(), spread_text(c.r, "%.2f").c_str(),
        ratio_text(c.fresh_reduction_estimate).c_str(), ratio_text(c.speedup_estimate).c_str(),
        c.ideal_speedup ? fmt(c.ideal_speedup, "%.2f").c_str() : "-");
    o << line;
    for (const auto& e : c.errors) o << "    error: " << e << "\n";
  }
  write_controls(o, cells);
  if (reading == "held") write_first_touch(o, cells, margin);
  write_final_evaluations(o, cells);
  write_tuning(o, cells);
  if (reading == "held")
    o << "(reached = holds the target: from the first evaluation at the target after which "
         "none is more than the margin on the wrong side of it)\n";
  o << "(median [min-max] over the seeds that reached the target; fresh/ = baseline fresh "
       "over this cell's; speedup = baseline wall-clock time to target over this cell's "
       "(from building the pipeline; with eval_mode snapshots evaluations are off the "
       "clock); both as median ratio [95% percentile-bootstrap interval] over all seeds, a "
       "run that missed the target counted at its budget, ~ when a median is censored; "
       "ideal = min(achieved echo, baseline R))\n";
  return o.str();
}

namespace detail {

namespace {

// The values of one cell's finished runs, each list over the seeds that have it.
struct RunValues {
  int64_t reached = 0;
  std::vector<double> fresh, steps, secs, wall, echo, r, raw, rate, final_accuracy, final_loss;
  std::vector<Observation> fresh_obs, wall_obs;  // every run, censored at its budget
};

// Adds a run's figure to target to `obs`, or (censored) its figure at the end of the run
// when it did not reach the target; nothing when the summary has no such figure.
void observe(const nlohmann::json& s, const char* to_target, const char* total,
             std::vector<Observation>& obs) {
  const bool hit = s.value("reached_target", false);
  if (auto x = opt_number(s, hit ? to_target : total)) obs.push_back({*x, !hit});
}

// Adds one finished run's summary to the cell's values.
void add_run(const nlohmann::json& s, RunValues& v) {
  if (auto x = opt_number(s, "achieved_echo")) v.echo.push_back(*x);
  if (auto x = opt_number(s, "r_estimate")) v.r.push_back(*x);
  if (auto x = opt_number(s, "steps_per_second")) v.rate.push_back(*x);
  if (auto x = opt_number(s, "final_accuracy")) v.final_accuracy.push_back(*x);
  if (auto x = opt_number(s, "final_loss")) v.final_loss.push_back(*x);
  observe(s, "fresh_to_target", "fresh", v.fresh_obs);
  observe(s, "wall_seconds_to_target", "wall_seconds", v.wall_obs);
  if (!s.value("reached_target", false)) return;
  if (auto x = opt_number(s, "raw_reads_to_target")) v.raw.push_back(*x);
  ++v.reached;
  if (auto x = opt_number(s, "fresh_to_target")) v.fresh.push_back(*x);
  if (auto x = opt_number(s, "steps_to_target")) v.steps.push_back(*x);
  if (auto x = opt_number(s, "seconds_to_target")) v.secs.push_back(*x);
  if (auto x = opt_number(s, "wall_seconds_to_target")) v.wall.push_back(*x);
}

// One cell's result: its finished runs (of its current config), their spreads and
// estimates, and its status.
CellResult cell_result(const ExperimentSpec& spec, const ExperimentCell& spec_cell,
                       const std::map<std::string, std::vector<std::string>>& errors) {
  CellResult c;
  ExperimentCell cell = spec_cell;
  if (spec.tuning.enabled() || spec.tuning.from) {  // the final runs use the tuned rate
    c.tuning = tuning_state(spec, cell);
    if (!cell.lr) cell.lr = c.tuning->chosen;
  }
  c.cell = cell;
  auto it = errors.find(cell.id);
  if (it != errors.end()) c.errors = it->second;
  // Under "held", `first` has the same runs read by their first touch (their summaries as
  // the trainer wrote them), given beside.
  RunValues v, first;
  const bool reads_held = target_reading(spec).held;
  std::optional<HeldTarget> held;  // at the first finished run (it derives the cell's config)
  for (uint64_t seed : cell.seeds) {
    // Only results of this cell's current config count.
    const nlohmann::json s = finished_summary(spec, cell, seed);
    if (!s.is_object()) continue;
    c.runs.push_back({{"seed", seed}, {"summary", s}});
    if (reads_held && !held) held = held_target(spec, cell);
    add_run(summary_as_read(run_dir(spec, cell, seed), s, held), v);
    if (reads_held) add_run(s, first);
  }
  if (reads_held) {
    auto& f = c.first_touch.emplace();
    f.reached = first.reached;
    f.fresh = spread_of(first.fresh);
    f.fresh_observations = std::move(first.fresh_obs);
    f.wall_observations = std::move(first.wall_obs);
  }
  c.reached = v.reached;
  c.fresh = spread_of(v.fresh);
  c.steps = spread_of(v.steps);
  c.seconds = spread_of(v.secs);
  c.wall_seconds = spread_of(v.wall);
  c.achieved_echo = spread_of(v.echo);
  c.r = spread_of(v.r);
  c.raw_reads = spread_of(v.raw);
  c.steps_per_second = spread_of(v.rate);
  c.final_accuracy = spread_of(v.final_accuracy);
  c.final_loss = spread_of(v.final_loss);
  c.fresh_estimate = estimate_median(v.fresh_obs);
  c.wall_estimate = estimate_median(v.wall_obs);
  c.fresh_observations = std::move(v.fresh_obs);
  c.wall_observations = std::move(v.wall_obs);
  if (c.runs.size() == cell.seeds.size())
    c.status = c.errors.empty() ? "done" : "partial";
  else if (!c.errors.empty())
    c.status = c.runs.empty() ? "failed" : "partial";
  else
    c.status = c.runs.empty() ? "not_run" : "partial";
  return c;
}

// The members of a tuning group that lost, with no final runs: "not_chosen", their
// tuning's note naming the winner (from the tunings the cells already read).
void mark_not_chosen(const ExperimentSpec& spec, std::vector<CellResult>& cells) {
  for (const auto& [group, ids] : spec.tuning.groups) {
    std::vector<const TuningState*> states;
    for (const std::string& id : ids) {
      auto c = std::find_if(cells.begin(), cells.end(),
                            [&](const CellResult& r) { return r.cell.id == id; });
      states.push_back(c != cells.end() && c->tuning ? &*c->tuning : nullptr);
    }
    const std::optional<std::string> winner = group_winner(ids, states);
    if (!winner) continue;
    for (auto& c : cells) {
      if (c.cell.id == *winner || !c.runs.empty() ||
          std::find(ids.begin(), ids.end(), c.cell.id) == ids.end())
        continue;
      c.status = "not_chosen";
      if (c.tuning)
        c.tuning->note += (c.tuning->note.empty() ? "" : "; ") + std::string("tuning group ") +
                          group + " chose " + *winner;
    }
  }
}

// Each cell against its baseline (reductions, speed-ups) and its control.
void compare_cells(std::vector<CellResult>& cells) {
  for (auto& c : cells) {
    const CellResult* b = baseline_for(cells, c);
    if (!b || b == &c) continue;
    if (b->fresh.median && c.fresh.median) c.fresh_reduction = *b->fresh.median / *c.fresh.median;
    // Wall-clock time to target: the pipeline keeps reading while evaluations run, so
    // training time alone would credit a run with the data it read during them.
    if (b->wall_seconds.median && c.wall_seconds.median && *c.wall_seconds.median > 0)
      c.speedup = *b->wall_seconds.median / *c.wall_seconds.median;
    if (b->r.median && c.achieved_echo.median)
      c.ideal_speedup = std::min(*c.achieved_echo.median, *b->r.median);
    if (b->steps_per_second.median && c.steps_per_second.median && *b->steps_per_second.median > 0)
      c.cpu_cap = *c.steps_per_second.median / *b->steps_per_second.median;
    c.fresh_reduction_estimate = estimate_ratio(b->fresh_observations, c.fresh_observations);
    c.speedup_estimate = estimate_ratio(b->wall_observations, c.wall_observations);
    if (c.first_touch && b->first_touch) {
      c.first_touch->fresh_reduction =
          estimate_ratio(b->first_touch->fresh_observations, c.first_touch->fresh_observations);
      c.first_touch->speedup =
          estimate_ratio(b->first_touch->wall_observations, c.first_touch->wall_observations);
    }
  }
  for (auto& c : cells) {
    const CellResult* k = control_for(cells, c);
    if (!k) continue;
    c.control = k->cell.id;
    c.fresh_reduction_vs_control = estimate_ratio(k->fresh_observations, c.fresh_observations);
  }
}

void write_csv_row(std::ostream& csv, const CellResult& c) {
  std::string errs;
  for (const auto& e : c.errors) errs += (errs.empty() ? "" : "; ") + e;
  csv << csv_field(c.cell.id) << "," << variant_name(c.cell.variant) << "," << c.cell.factor << ","
      << c.cell.shuffle_after_echo << "," << c.cell.batch_size << "," << c.cell.seeds.size() << ","
      << c.runs.size() << "," << c.reached;
  for (const Spread* s : {&c.fresh, &c.steps, &c.seconds, &c.wall_seconds, &c.achieved_echo, &c.r})
    csv << "," << fmt(s->median, "%.6g") << "," << fmt(s->min, "%.6g") << ","
        << fmt(s->max, "%.6g");
  csv << "," << fmt(c.fresh_reduction, "%.4g") << "," << fmt(c.speedup, "%.4g") << ","
      << fmt(c.ideal_speedup, "%.4g") << "," << c.status << "," << csv_field(errs) << ","
      << (c.fresh_estimate ? c.fresh_estimate->censored : 0);
  for (const auto* e : {&c.fresh_reduction_estimate, &c.speedup_estimate}) {
    csv << "," << (*e ? fmt((*e)->ci.lo, "%.4g") : "") << ","
        << (*e ? fmt((*e)->ci.hi, "%.4g") : "");
  }
  csv << "," << (c.cell.lr ? fmt(*c.cell.lr, "%.6g") : "") << "," << fmt(c.cpu_cap, "%.4g") << "\n";
}

void write_csv(const ExperimentReport& report) {
  std::ofstream csv(report.csv_path, std::ios::trunc);
  if (!csv) throw Error(ErrorCode::kIo, kStage, "cannot write", report.csv_path);
  csv << "cell,variant,factor,shuffle_after_echo,batch_size,seeds,runs,reached,"
         "fresh_median,fresh_min,fresh_max,steps_median,steps_min,steps_max,"
         "seconds_median,seconds_min,seconds_max,wall_seconds_median,wall_seconds_min,"
         "wall_seconds_max,achieved_echo_median,achieved_echo_min,achieved_echo_max,"
         "r_median,r_min,r_max,fresh_reduction,speedup,ideal_speedup,status,errors,"
         "censored_runs,fresh_reduction_ci_lo,fresh_reduction_ci_hi,speedup_ci_lo,"
         "speedup_ci_hi,lr,cpu_cap\n";
  for (const auto& c : report.cells) write_csv_row(csv, c);
}

// results.json, with the plots (drawn here when asked for).
void write_json(const ExperimentSpec& spec, const ExperimentOptions& options,
                ExperimentReport& report) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : report.cells) cells.push_back(c.to_json());
  nlohmann::json doc = {
      {"name", spec.name},
      {"reading", report.reading},
      {"margin", report.margin},
      {"out", spec.out},
      {"target_accuracy", spec.base_config.value("target_accuracy", nlohmann::json())},
      {"target_loss", spec.base_config.value("target_loss", nlohmann::json())},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"cells", cells}};
  if (options.plots) {
    try {
      make_plots(spec, report);
    } catch (const std::exception& e) {
      report.plot_note = std::string("plots failed: ") + e.what();
    }
  } else {
    report.plot_note = "plots not requested";
  }
  doc["plots"] = report.plots;
  write_json_file(report.json_path, doc);
}

}  // namespace

// The report in steps: each cell's result, the comparisons between cells, then
// results.csv and results.json.
ExperimentReport collect(const ExperimentSpec& spec, const ExperimentOptions& options,
                         const std::map<std::string, std::vector<std::string>>& errors,
                         ExperimentReport report) {
  report.cells.clear();
  const TargetReading reading = target_reading(spec);
  report.reading = reading.held ? "held" : "first_touch";
  report.margin = reading.margin;
  for (const auto& spec_cell : spec.cells)
    report.cells.push_back(cell_result(spec, spec_cell, errors));
  mark_not_chosen(spec, report.cells);
  compare_cells(report.cells);
  fs::create_directories(spec.out);
  report.csv_path = (fs::path(spec.out) / "results.csv").string();
  report.json_path = (fs::path(spec.out) / "results.json").string();
  write_csv(report);
  write_json(spec, options, report);
  return report;
}

}  // namespace detail
}  // namespace dataecho::train
