// The results of a sweep: per-cell aggregation over seeds, comparison with the baseline,
// results.csv / results.json, the text table, and gnuplot plots (PNG and SVG).
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

std::string gp_string(const std::string& s) {  // a double-quoted gnuplot string
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
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

// The control of an example-echo cell with a shuffle after its echo (change 7 of
// docs/protocol.md): the cell that echoes at e = 1 before augmentation with the same
// shuffle and batch size, no overrides. nullptr when there is none.
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

std::string series_of(const ExperimentCell& c) {
  std::string s = variant_name(c.variant);
  if (c.variant == EchoVariant::kAdaptive &&
      c.adaptive_placement != EchoVariant::kExampleBeforeAugmentation)
    s += std::string(" (") + variant_name(c.adaptive_placement) + ")";
  if (c.shuffle_after_echo > 0) s += ", shuffle " + std::to_string(c.shuffle_after_echo);
  if (c.batch_size > 0) s += ", batch " + std::to_string(c.batch_size);
  if (!c.overrides.is_null()) s += ", " + c.id;
  for (char& ch : s) {
    if (ch == '_') ch = ' ';
  }
  return s;
}

// x of a cell in the factor plots: the nominal factor, or the achieved one for adaptive.
std::optional<double> x_of(const CellResult& c) {
  if (c.cell.variant == EchoVariant::kAdaptive) return c.achieved_echo.median;
  if (c.cell.variant == EchoVariant::kBaseline) return 1.0;
  return c.cell.factor;
}

struct Series {
  std::string title;
  std::vector<std::vector<double>> rows;  // x, y, ylow, yhigh
};

void write_blocks(const std::string& path, std::vector<Series>& series) {
  std::ofstream out(path, std::ios::trunc);
  for (auto& s : series) {
    std::sort(s.rows.begin(), s.rows.end());
    out << "# " << s.title << "\n";
    for (const auto& r : s.rows) {
      for (size_t i = 0; i < r.size(); ++i) out << (i ? " " : "") << r[i];
      out << "\n";
    }
    out << "\n\n";
  }
}

// Evaluations of one run: (fresh, accuracy).
std::vector<std::vector<double>> read_evals(const std::string& dir) {
  std::vector<std::vector<double>> rows;
  std::ifstream in(fs::path(dir) / "evals.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      rows.push_back({j.at("fresh").get<double>(), j.at("accuracy").get<double>()});
    } catch (const std::exception&) {
    }
  }
  return rows;
}

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

// Writes the data files and plots.gp into out/plots and runs gnuplot there.
// What the plots show: the series of each plot, the baseline cell, the largest x.
struct PlotData {
  std::vector<Series> fresh, speedup, accuracy;
  const CellResult* base = nullptr;
  double max_x = 1;
};

// The plots' data files in `dir`: 1. fresh examples to target vs echo factor, 2. accuracy
// vs fresh examples (baseline and best echo cell), 3. speedup vs echo factor.
PlotData write_plot_data(const ExperimentSpec& spec, const ExperimentReport& report,
                         const fs::path& dir) {
  const auto& cells = report.cells;
  // 1. Fresh examples to target vs echo factor; 3. speedup vs echo factor.
  std::map<std::string, Series> fresh_series, speed_series;
  PlotData d;
  const CellResult*& base = d.base;
  double& max_x = d.max_x;
  for (const auto& c : cells) {
    if (c.cell.variant == EchoVariant::kBaseline && c.cell.overrides.is_null() && !base &&
        c.fresh_estimate)
      base = &c;
    std::optional<double> x = x_of(c);
    if (!x) continue;
    max_x = std::max(max_x, *x);
    const std::string key = series_of(c.cell);
    // Error bars: the 95% bootstrap interval of the median over seeds.
    if (c.fresh_estimate) {
      const MedianEstimate& f = *c.fresh_estimate;
      fresh_series[key].title = key;
      fresh_series[key].rows.push_back({*x, f.median, f.ci.lo, f.ci.hi});
    }
    if (c.cell.variant != EchoVariant::kBaseline && c.speedup_estimate) {
      const RatioEstimate& sp = *c.speedup_estimate;
      speed_series[key].title = key;
      speed_series[key].rows.push_back({*x, sp.ratio, sp.ci.lo, sp.ci.hi});
    }
  }
  std::vector<Series>& fs_list = d.fresh;
  std::vector<Series>& sp_list = d.speedup;
  for (auto& [k, s] : fresh_series) fs_list.push_back(s);
  for (auto& [k, s] : speed_series) sp_list.push_back(s);
  write_blocks((dir / "fresh_vs_factor.dat").string(), fs_list);
  write_blocks((dir / "speedup_vs_factor.dat").string(), sp_list);

  // 2. Accuracy vs fresh examples: baseline and the best echo cell (fewest fresh examples).
  const CellResult* best = nullptr;
  for (const auto& c : cells) {
    if (c.cell.variant == EchoVariant::kBaseline || !c.fresh_estimate) continue;
    if (!best || c.fresh_estimate->median < best->fresh_estimate->median) best = &c;
  }
  std::vector<Series>& acc_list = d.accuracy;
  auto add_run = [&](const CellResult* c) {
    if (!c || c->cell.seeds.empty()) return;
    // The seed whose fresh-to-target is the cell's median (or the first seed).
    uint64_t seed = c->cell.seeds.front();
    double best_gap = 1e300;
    for (const auto& r : c->runs) {
      auto f = opt_number(r["summary"], "fresh_to_target");
      if (f && c->fresh_estimate && std::abs(*f - c->fresh_estimate->median) < best_gap) {
        best_gap = std::abs(*f - c->fresh_estimate->median);
        seed = r.value("seed", seed);
      }
    }
    Series s;
    s.title = c->cell.id + " (seed " + std::to_string(seed) + ")";
    s.rows = read_evals(detail::run_dir(spec, c->cell, seed));
    if (!s.rows.empty()) acc_list.push_back(std::move(s));
  };
  add_run(base);
  add_run(best);
  {
    std::ofstream out(dir / "accuracy_vs_fresh.dat", std::ios::trunc);
    for (const auto& s : acc_list) {
      out << "# " << s.title << "\n";
      for (const auto& r : s.rows) out << r[0] << " " << r[1] << "\n";
      out << "\n\n";
    }
  }
  return d;
}

// The gnuplot script drawing each plot that has data (its name goes to `files`).
std::string plot_script(const ExperimentSpec& spec, const PlotData& d,
                        std::vector<std::string>& files) {
  const CellResult* base = d.base;
  const double max_x = d.max_x;
  const std::vector<Series>& fs_list = d.fresh;
  const std::vector<Series>& sp_list = d.speedup;
  const std::vector<Series>& acc_list = d.accuracy;
  double r_base = 0;
  if (base && base->r.median) r_base = *base->r.median;
  const std::optional<double> target = opt_number(spec.base_config, "target_accuracy");

  std::ostringstream gp;
  gp << "# Written by dataecho experiment; run `gnuplot plots.gp` in this folder.\n"
     << "set key outside right top\nset grid\n"
     << "do for [fmt in \"png svg\"] {\n"
     << "if (fmt eq \"png\") { set terminal pngcairo size 1000,600 noenhanced font \"sans,10\" } "
        "else { set terminal svg size 1000,600 noenhanced font \"sans,10\" dynamic }\n";
  const std::string name = gp_string(spec.name);
  if (!fs_list.empty()) {
    gp << "set output \"fresh_vs_factor.\".fmt\n"
       << "set title " << name << ".\": fresh examples to target vs echo factor\"\n"
       << "set xlabel \"echo factor (adaptive: achieved)\"\nset ylabel \"fresh examples to "
          "target (median, 95% bootstrap CI over seeds)\"\n"
       << "set xrange [0.5:" << max_x + 0.5 << "]\nset yrange [0:*]\nplot ";
    for (size_t i = 0; i < fs_list.size(); ++i) {
      const bool is_base = fs_list[i].title.rfind("baseline", 0) == 0;
      gp << (i ? ", \\\n  " : "") << "\"fresh_vs_factor.dat\" index " << i
         << " using 1:2:3:4 with yerrorlines " << (is_base ? "pt 7 ps 2 lc rgb \"black\" " : "")
         << "title " << gp_string(fs_list[i].title);
    }
    if (base)
      gp << ", \\\n  " << base->fresh_estimate->median
         << " with lines dt 2 lc rgb \"black\" title \"baseline (median)\"";
    gp << "\n";
    files.push_back("fresh_vs_factor");
  }
  if (!acc_list.empty()) {
    gp << "set output \"accuracy_vs_fresh.\".fmt\n"
       << "set title " << name << ".\": accuracy on the evaluation set vs fresh examples read\"\n"
       << "set xlabel \"fresh examples read\"\nset ylabel \"evaluation accuracy (the target's "
          "set)\"\n"
       << "set xrange [0:*]\nset yrange [*:*]\nplot ";
    for (size_t i = 0; i < acc_list.size(); ++i)
      gp << (i ? ", \\\n  " : "") << "\"accuracy_vs_fresh.dat\" index " << i
         << " using 1:2 with linespoints title " << gp_string(acc_list[i].title);
    if (target) gp << ", \\\n  " << *target << " with lines dt 2 lc rgb \"gray\" title \"target\"";
    gp << "\n";
    files.push_back("accuracy_vs_fresh");
  }
  if (!sp_list.empty()) {
    char rb[64];
    std::snprintf(rb, sizeof rb, "%.2f", r_base);
    gp << "set output \"speedup_vs_factor.\".fmt\n"
       << "set title " << name << ".\": wall-clock speedup to target vs echo factor\"\n"
       << "set xlabel \"echo factor (adaptive: achieved)\"\nset ylabel \"speedup vs baseline "
          "(wall-clock time to target; median, 95% CI)\"\n"
       << "set xrange [1:" << max_x + 0.5 << "]\nset yrange [0:*]\n"
       << "R = " << (r_base > 0 ? r_base : max_x + 1) << "\nideal(x) = x < R ? x : R\nplot ";
    for (size_t i = 0; i < sp_list.size(); ++i)
      gp << (i ? ", \\\n  " : "") << "\"speedup_vs_factor.dat\" index " << i
         << " using 1:2:3:4 with yerrorlines title " << gp_string(sp_list[i].title);
    gp << ", \\\n  ideal(x) with lines dt 2 lc rgb \"black\" title \"ideal min(e, R), R = "
       << (r_base > 0 ? rb : "?") << " (baseline)\", \\\n  1 with lines lc rgb \"gray\" notitle\n";
    files.push_back("speedup_vs_factor");
  }
  gp << "}\n";
  return gp.str();
}

// Runs gnuplot on plots.gp in `dir`; lists the pictures in the report, or says why not.
void draw_plots(const fs::path& dir, const std::vector<std::string>& files,
                ExperimentReport& report) {
  if (files.empty()) {
    report.plot_note = "no cell reached the target: nothing to plot";
    return;
  }
  if (!have_gnuplot()) {
    report.plot_note =
        "gnuplot not found (apt-get install gnuplot-nox): plots.gp written, not drawn";
    return;
  }
  const std::string cmd = "cd '" + dir.string() + "' && gnuplot plots.gp > gnuplot.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    report.plot_note = "gnuplot failed: see " + (dir / "gnuplot.log").string();
    return;
  }
  for (const auto& f : files) {
    for (const char* ext : {".png", ".svg"}) {
      const fs::path p = dir / (f + ext);
      if (fs::exists(p)) report.plots.push_back(p.string());
    }
  }
}

void make_plots(const ExperimentSpec& spec, ExperimentReport& report) {
  const fs::path dir = fs::path(spec.out) / "plots";
  fs::create_directories(dir);
  const PlotData d = write_plot_data(spec, report, dir);
  std::vector<std::string> files;
  {
    std::ofstream out(dir / "plots.gp", std::ios::trunc);
    out << plot_script(spec, d, files);
  }
  draw_plots(dir, files, report);
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
                      {"cpu_cap", opt_json(cpu_cap)},
                      {"fresh_reduction", opt_json(fresh_reduction)},
                      {"speedup", opt_json(speedup)},
                      {"ideal_speedup", opt_json(ideal_speedup)},
                      {"errors", errors}};
  auto est = [](const auto& e) { return e ? e->to_json() : nlohmann::json(nullptr); };
  j["estimates"] = {{"fresh_to_target", est(fresh_estimate)},
                    {"wall_seconds_to_target", est(wall_estimate)},
                    {"fresh_reduction", est(fresh_reduction_estimate)},
                    {"speedup", est(speedup_estimate)},
                    {"method",
                     "median over seeds; runs that never reached the target count at their "
                     "budget (censored); 95% percentile bootstrap, 10,000 resamples, fixed "
                     "seed; ratios resample baseline and cell independently"}};
  if (!control.empty()) {  // only where a control exists: other reports are unchanged
    j["control"] = control;
    j["estimates"]["fresh_reduction_vs_control"] = est(fresh_reduction_vs_control);
  }
  if (cell.variant == EchoVariant::kAdaptive)
    j["adaptive_placement"] = variant_name(cell.adaptive_placement);
  j["lr"] = cell.lr ? nlohmann::json(*cell.lr) : nlohmann::json(nullptr);
  if (tuning) j["tuning"] = tuning->to_json();
  if (!cell.overrides.is_null()) j["overrides"] = cell.overrides;
  return j;
}

static std::string ratio_text(const std::optional<RatioEstimate>& e) {
  if (!e) return "-";
  char b[96];
  std::snprintf(b, sizeof b, "%s%.2fx [%.2f-%.2f]", e->censored ? "~" : "", e->ratio, e->ci.lo,
                e->ci.hi);
  return b;
}

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
  bool controlled = false;
  for (const auto& c : cells) controlled = controlled || !c.control.empty();
  if (controlled) {
    o << "against the control (docs/protocol.md change 7, added after the results it checks): "
         "control fresh / this cell's, median ratio [95% interval]:\n";
    for (const auto& c : cells) {
      if (c.control.empty()) continue;
      o << "  " << c.cell.id << " vs " << c.control << ": "
        << ratio_text(c.fresh_reduction_vs_control) << " (vs baseline "
        << ratio_text(c.fresh_reduction_estimate) << ")\n";
    }
  }
  bool tuned = false;
  for (const auto& c : cells) tuned = tuned || c.tuning.has_value();
  if (tuned) {
    o << "learning-rate tuning (median fresh examples to target over the tuning seeds, "
         "reached/runs; * chosen):\n";
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
  o << "(median [min-max] over the seeds that reached the target; fresh/ = baseline fresh "
       "over this cell's; speedup = baseline wall-clock time to target over this cell's "
       "(from building the pipeline; with eval_mode snapshots evaluations are off the "
       "clock); both as median ratio [95% percentile-bootstrap interval] over all seeds, a "
       "run that missed the target counted at its budget, ~ when a median is censored; "
       "ideal = min(achieved echo, baseline R))\n";
  return o.str();
}

namespace detail {

ExperimentReport collect(const ExperimentSpec& spec, const ExperimentOptions& options,
                         const std::map<std::string, std::vector<std::string>>& errors,
                         ExperimentReport report) {
  report.cells.clear();
  for (const auto& spec_cell : spec.cells) {
    CellResult c;
    ExperimentCell cell = spec_cell;
    if (spec.tuning.enabled() || spec.tuning.from) {  // the final runs use the tuned rate
      c.tuning = tuning_state(spec, cell);
      if (!cell.lr) cell.lr = c.tuning->chosen;
    }
    c.cell = cell;
    auto it = errors.find(cell.id);
    if (it != errors.end()) c.errors = it->second;
    std::vector<double> fresh, steps, secs, wall, echo, r, raw, rate;
    std::vector<Observation> fresh_obs, wall_obs;  // every run, censored at its budget
    for (uint64_t seed : cell.seeds) {
      // Only results of this cell's current config count.
      const nlohmann::json s = finished_summary(spec, cell, seed);
      if (!s.is_object()) continue;
      c.runs.push_back({{"seed", seed}, {"summary", s}});
      if (auto v = opt_number(s, "achieved_echo")) echo.push_back(*v);
      if (auto v = opt_number(s, "r_estimate")) r.push_back(*v);
      if (auto v = opt_number(s, "steps_per_second")) rate.push_back(*v);
      const bool hit = s.value("reached_target", false);
      auto observe = [&](std::vector<Observation>& obs, const char* to_target, const char* total) {
        if (auto v = opt_number(s, hit ? to_target : total)) obs.push_back({*v, !hit});
      };
      observe(fresh_obs, "fresh_to_target", "fresh");
      observe(wall_obs, "wall_seconds_to_target", "wall_seconds");
      if (!hit) continue;
      if (auto v = opt_number(s, "raw_reads_to_target")) raw.push_back(*v);
      ++c.reached;
      if (auto v = opt_number(s, "fresh_to_target")) fresh.push_back(*v);
      if (auto v = opt_number(s, "steps_to_target")) steps.push_back(*v);
      if (auto v = opt_number(s, "seconds_to_target")) secs.push_back(*v);
      if (auto v = opt_number(s, "wall_seconds_to_target")) wall.push_back(*v);
    }
    c.fresh = spread_of(fresh);
    c.steps = spread_of(steps);
    c.seconds = spread_of(secs);
    c.wall_seconds = spread_of(wall);
    c.achieved_echo = spread_of(echo);
    c.r = spread_of(r);
    c.raw_reads = spread_of(raw);
    c.steps_per_second = spread_of(rate);
    c.fresh_estimate = estimate_median(fresh_obs);
    c.wall_estimate = estimate_median(wall_obs);
    c.fresh_observations = std::move(fresh_obs);
    c.wall_observations = std::move(wall_obs);
    if (c.runs.size() == cell.seeds.size())
      c.status = c.errors.empty() ? "done" : "partial";
    else if (!c.errors.empty())
      c.status = c.runs.empty() ? "failed" : "partial";
    else
      c.status = c.runs.empty() ? "not_run" : "partial";
    report.cells.push_back(std::move(c));
  }
  for (auto& c : report.cells) {
    const CellResult* b = baseline_for(report.cells, c);
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
  }
  for (auto& c : report.cells) {
    const CellResult* k = control_for(report.cells, c);
    if (!k) continue;
    c.control = k->cell.id;
    c.fresh_reduction_vs_control = estimate_ratio(k->fresh_observations, c.fresh_observations);
  }

  fs::create_directories(spec.out);
  report.csv_path = (fs::path(spec.out) / "results.csv").string();
  report.json_path = (fs::path(spec.out) / "results.json").string();
  {
    std::ofstream csv(report.csv_path, std::ios::trunc);
    if (!csv) throw Error(ErrorCode::kIo, kStage, "cannot write", report.csv_path);
    csv << "cell,variant,factor,shuffle_after_echo,batch_size,seeds,runs,reached,"
           "fresh_median,fresh_min,fresh_max,steps_median,steps_min,steps_max,"
           "seconds_median,seconds_min,seconds_max,wall_seconds_median,wall_seconds_min,"
           "wall_seconds_max,achieved_echo_median,achieved_echo_min,achieved_echo_max,"
           "r_median,r_min,r_max,fresh_reduction,speedup,ideal_speedup,status,errors,"
           "censored_runs,fresh_reduction_ci_lo,fresh_reduction_ci_hi,speedup_ci_lo,"
           "speedup_ci_hi,lr,cpu_cap\n";
    for (const auto& c : report.cells) {
      std::string errs;
      for (const auto& e : c.errors) errs += (errs.empty() ? "" : "; ") + e;
      csv << csv_field(c.cell.id) << "," << variant_name(c.cell.variant) << "," << c.cell.factor
          << "," << c.cell.shuffle_after_echo << "," << c.cell.batch_size << ","
          << c.cell.seeds.size() << "," << c.runs.size() << "," << c.reached;
      for (const Spread* s :
           {&c.fresh, &c.steps, &c.seconds, &c.wall_seconds, &c.achieved_echo, &c.r})
        csv << "," << fmt(s->median, "%.6g") << "," << fmt(s->min, "%.6g") << ","
            << fmt(s->max, "%.6g");
      csv << "," << fmt(c.fresh_reduction, "%.4g") << "," << fmt(c.speedup, "%.4g") << ","
          << fmt(c.ideal_speedup, "%.4g") << "," << c.status << "," << csv_field(errs) << ","
          << (c.fresh_estimate ? c.fresh_estimate->censored : 0);
      for (const auto* e : {&c.fresh_reduction_estimate, &c.speedup_estimate}) {
        csv << "," << (*e ? fmt((*e)->ci.lo, "%.4g") : "") << ","
            << (*e ? fmt((*e)->ci.hi, "%.4g") : "");
      }
      csv << "," << (c.cell.lr ? fmt(*c.cell.lr, "%.6g") : "") << "," << fmt(c.cpu_cap, "%.4g")
          << "\n";
    }
  }
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : report.cells) cells.push_back(c.to_json());
  nlohmann::json doc = {
      {"name", spec.name},
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
  return report;
}

}  // namespace detail
}  // namespace dataecho::train
