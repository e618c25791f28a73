// `dataecho bench echo`: does echoing buy the ideal speedup? The paper's setting without
// a model: an upstream that takes t_up per batch, sleeping as a network read does, and a
// consumer (the "accelerator") that takes t_down per step. R = t_up / t_down. Echoing
// with factor e should speed training steps up by min(e, R) over e = 1 (docs/echo.md).
//
// Every cell runs real pipeline nodes, so it measures the echo operator, not a model of it:
//   fixed:    range -> batch -> map(sleep t_up) -> prefetch -> echo(e)      -> consumer
//   adaptive: range -> batch -> map(sleep t_up) -> echo(adaptive, max_factor) -> consumer
// The consumer takes t_down per step on a fixed schedule (see run_cell). Steps/s is
// measured between two fresh elements (so that a window holds whole groups of copies),
// after a short warm-up.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>

#include "commands.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho::cli {
namespace {

struct Config {
  double downstream_ms = 5;
  double upstream_ms = 0;  // 0: one R per entry of `ratios`
  std::vector<double> ratios{2, 4, 6};
  double factor_step = 1;
  double seconds = 1.5;  // measured time per cell
  double max_factor = 8;
  int64_t batch_size = 32;
  int64_t prefetch = 4;
  int64_t warmup_fresh = 2;
  bool json = false;
};

struct Cell {
  double ratio = 0;  // R
  double upstream_ms = 0;
  std::string mode;   // "fixed" or "adaptive"
  double factor = 0;  // fixed: e; adaptive: max_factor
  int64_t steps = 0;
  int64_t fresh = 0;
  double seconds = 0;
  double steps_per_s = 0;
  double achieved_factor = 0;  // steps / fresh batches in the window
  double speedup = 0;          // over e = 1 at the same R
  double ideal = 0;            // min(e, R) (adaptive: min(max_factor, R)), at least 1
  double ratio_to_ideal = 0;
};

PipelineDef cell_def(const Config& c, double upstream_ms, std::optional<double> factor) {
  PipelineDef d = range(int64_t{1} << 40).seed(1).batch({.size = c.batch_size});
  d.map("sleep", {{"ms", upstream_ms}});
  if (factor)
    d.prefetch(c.prefetch).echo({.factor = *factor});
  else
    d.echo({.adaptive = true, .max_factor = c.max_factor});
  return d;
}

Cell run_cell(const Config& c, double ratio, std::optional<double> factor) {
  using Clock = std::chrono::steady_clock;
  Cell cell;
  cell.ratio = ratio;
  cell.upstream_ms = ratio * c.downstream_ms;
  cell.mode = factor ? "fixed" : "adaptive";
  cell.factor = factor ? *factor : c.max_factor;
  auto pipeline = cell_def(c, cell.upstream_ms, factor).build();
  const auto step = std::chrono::nanoseconds(std::llround(c.downstream_ms * 1e6));
  const auto window = std::chrono::duration<double>(c.seconds);
  int64_t fresh_seen = 0;
  bool measuring = false;
  Clock::time_point start;
  Clock::time_point step_end = Clock::now();
  while (true) {
    const auto asked = Clock::now();
    auto e = pipeline->next();
    if (!e) throw Error(ErrorCode::kInternal, "bench echo", "the pipeline ended early");
    const auto now = Clock::now();
    const bool fresh = e->fresh_rows() > 0;
    if (fresh) {
      ++fresh_seen;
      if (!measuring && fresh_seen > c.warmup_fresh) {
        measuring = true;
        start = now;
      } else if (measuring && now - start >= window) {
        cell.seconds = std::chrono::duration<double>(now - start).count();
        break;
      }
    }
    if (measuring) {
      ++cell.steps;
      cell.fresh += fresh;
    }
    // The training step takes t_down, on a fixed schedule as on an accelerator with a
    // queue: it starts at the previous step's nominal end, plus however long next()
    // blocked. A late wake-up of this thread on a busy host is caught up rather than
    // counted as a slower step; waiting for the pipeline is counted in full.
    const auto late = std::max(Clock::duration::zero(), asked - step_end);
    step_end = std::max(step_end, now - late) + step;
    std::this_thread::sleep_until(step_end);
  }
  cell.steps_per_s = static_cast<double>(cell.steps) / cell.seconds;
  cell.achieved_factor =
      cell.fresh > 0 ? static_cast<double>(cell.steps) / static_cast<double>(cell.fresh) : 0;
  cell.ideal = std::max(1.0, std::min(cell.factor, ratio));
  return cell;
}

nlohmann::json to_json(const Cell& c) {
  return {{"R", c.ratio},
          {"upstream_ms", c.upstream_ms},
          {"mode", c.mode},
          {c.mode == "fixed" ? "factor" : "max_factor", c.factor},
          {"steps", c.steps},
          {"fresh", c.fresh},
          {"seconds", c.seconds},
          {"steps_per_s", c.steps_per_s},
          {"achieved_factor", c.achieved_factor},
          {"speedup", c.speedup},
          {"ideal", c.ideal},
          {"ratio_to_ideal", c.ratio_to_ideal}};
}

void run(const Config& c) {
  if (c.downstream_ms <= 0)
    throw Error(ErrorCode::kInvalidArgument, "bench echo", "--downstream-ms must be > 0");
  if (c.factor_step <= 0)
    throw Error(ErrorCode::kInvalidArgument, "bench echo", "--factor-step must be > 0");
  if (c.seconds <= 0)
    throw Error(ErrorCode::kInvalidArgument, "bench echo", "--seconds must be > 0");
  std::vector<double> ratios = c.ratios;
  if (c.upstream_ms > 0) ratios = {c.upstream_ms / c.downstream_ms};
  for (double r : ratios) {
    if (!(r > 0)) throw Error(ErrorCode::kInvalidArgument, "bench echo", "every ratio must be > 0");
  }

  std::vector<Cell> cells;
  char line[256];
  if (!c.json) {
    std::printf(
        "upstream sleeps R x %.3g ms per batch of %lld; consumer sleeps %.3g ms per step; %.3g s "
        "per cell\n",
        c.downstream_ms, static_cast<long long>(c.batch_size), c.downstream_ms, c.seconds);
    std::printf("%5s %9s %-9s %7s %9s %8s %8s %6s %8s\n", "R", "t_up_ms", "mode", "e", "steps/s",
                "speedup", "ideal", "ratio", "achieved");
    std::fflush(stdout);
  }
  for (double r : ratios) {
    std::vector<std::optional<double>> runs;
    for (double e = 1; e <= r + 2 + 1e-9; e += c.factor_step) runs.emplace_back(e);
    runs.emplace_back(std::nullopt);
    double base = 0;
    for (const auto& f : runs) {
      Cell cell = run_cell(c, r, f);
      if (f && *f == 1) base = cell.steps_per_s;
      cell.speedup = base > 0 ? cell.steps_per_s / base : 0;
      cell.ratio_to_ideal = cell.speedup / cell.ideal;
      if (!c.json) {
        std::snprintf(line, sizeof line, "%5.3g %9.3g %-9s %7.3g %9.2f %8.3f %8.3g %6.3f %8.3f\n",
                      r, cell.upstream_ms, cell.mode.c_str(), cell.factor, cell.steps_per_s,
                      cell.speedup, cell.ideal, cell.ratio_to_ideal, cell.achieved_factor);
        std::fputs(line, stdout);
        std::fflush(stdout);
      }
      cells.push_back(cell);
    }
  }

  double worst_fixed = INFINITY, worst_adaptive = INFINITY, worst_adaptive_factor_error = 0;
  for (const auto& cell : cells) {
    if (cell.mode == "fixed") {
      worst_fixed = std::min(worst_fixed, cell.ratio_to_ideal);
    } else {
      worst_adaptive = std::min(worst_adaptive, cell.ratio_to_ideal);
      double target = std::max(1.0, std::min(cell.factor, cell.ratio));
      worst_adaptive_factor_error =
          std::max(worst_adaptive_factor_error, std::abs(cell.achieved_factor - target) / target);
    }
  }
  if (c.json) {
    nlohmann::json out;
    out["benchmark"] = "echo";
    out["downstream_ms"] = c.downstream_ms;
    out["seconds_per_cell"] = c.seconds;
    out["batch_size"] = c.batch_size;
    out["prefetch"] = c.prefetch;
    out["max_factor"] = c.max_factor;
    out["cells"] = nlohmann::json::array();
    for (const auto& cell : cells) out["cells"].push_back(to_json(cell));
    out["summary"] = {{"worst_fixed_ratio_to_ideal", worst_fixed},
                      {"worst_adaptive_ratio_to_ideal", worst_adaptive},
                      {"worst_adaptive_factor_error", worst_adaptive_factor_error}};
    std::cout << out.dump(2) << std::endl;
  } else {
    std::printf(
        "worst fixed ratio to ideal %.3f (target >= 0.95); worst adaptive %.3f (target >= 0.95), "
        "achieved factor off R by at most %.1f%% (target <= 10%%)\n",
        worst_fixed, worst_adaptive, 100 * worst_adaptive_factor_error);
  }
}

}  // namespace

void add_bench_echo_command(CLI::App& bench) {
  auto c = std::make_shared<Config>();
  CLI::App* cmd = bench.add_subcommand("echo",
                                       "speedup of echoing over e=1 against the ideal min(e, R), "
                                       "for a sleeping upstream and consumer");
  cmd->add_option("--downstream-ms", c->downstream_ms, "consumer time per step (ms)")
      ->capture_default_str();
  cmd->add_option(
      "--upstream-ms", c->upstream_ms,
      "upstream time per batch (ms); sets one R = upstream/downstream instead of --ratios");
  cmd->add_option("--ratios", c->ratios, "the R = t_up/t_down to measure")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--factor-step", c->factor_step,
                  "step between echo factors 1 .. R+2 (0.5: finer)")
      ->capture_default_str();
  cmd->add_option("--seconds", c->seconds, "measured time per cell (longer: steadier figures)")
      ->capture_default_str();
  cmd->add_option("--max-factor", c->max_factor, "max_factor of the adaptive cells")
      ->capture_default_str();
  cmd->add_option("--batch-size", c->batch_size, "rows per batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prefetch", c->prefetch,
                  "prefetch buffer between the upstream and a fixed echo")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", c->json, "print one JSON document instead of the table");
  cmd->callback([c] { run(*c); });
}

}  // namespace dataecho::cli
