// The plots of a sweep (gnuplot, PNG and SVG): the data files per figure, the script,
// and drawing them when gnuplot is there.
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

namespace dataecho::train::detail {
namespace fs = std::filesystem;

namespace {

std::optional<double> opt_number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::string gp_string(const std::string& s) {  // a double-quoted gnuplot string
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// What the evaluation curve shows: the loss for a loss target (a language model), else
// the accuracy. Its files are <what>_vs_fresh.dat and .png/.svg.
std::string curve_of(const ExperimentSpec& spec) {
  return opt_number(spec.base_config, "target_loss") ? "loss" : "accuracy";
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
    // fresh examples, accuracy, loss
    std::ofstream out(dir / (curve_of(spec) + "_vs_fresh.dat"), std::ios::trunc);
    for (const auto& s : acc_list) {
      out << "# " << s.title << "\n";
      for (const auto& r : s.rows) out << r[0] << " " << r[1] << " " << r[2] << "\n";
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
  // A language model's target is a loss (target_loss): its curve is the loss, column 3.
  const std::optional<double> target_loss = opt_number(spec.base_config, "target_loss");
  const std::optional<double> target =
      target_loss ? target_loss : opt_number(spec.base_config, "target_accuracy");

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
    const std::string what = curve_of(spec);
    gp << "set output \"" << what << "_vs_fresh.\".fmt\n"
       << "set title " << name << ".\": " << what
       << " on the evaluation set vs fresh examples read\"\n"
       << "set xlabel \"fresh examples read\"\nset ylabel \"evaluation "
       << (target_loss ? "loss (nats per token, " : "accuracy (") << "the target's set)\"\n"
       << "set xrange [0:*]\nset yrange [*:*]\nplot ";
    for (size_t i = 0; i < acc_list.size(); ++i)
      gp << (i ? ", \\\n  " : "") << "\"" << what << "_vs_fresh.dat\" index " << i
         << " using 1:" << (target_loss ? 3 : 2) << " with linespoints title "
         << gp_string(acc_list[i].title);
    if (target) gp << ", \\\n  " << *target << " with lines dt 2 lc rgb \"gray\" title \"target\"";
    gp << "\n";
    files.push_back(what + "_vs_fresh");
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

}  // namespace

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

}  // namespace dataecho::train::detail
