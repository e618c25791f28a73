#include "dataecho/core/run_statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/core/rng.h"

namespace dataecho {
namespace {

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// `what` ("value", "baseline value") number i (from 0) must be finite.
void check_finite(double x, size_t i, const char* what, const char* stage) {
  if (!std::isfinite(x))
    throw_error(ErrorCode::kInvalidArgument, stage,
                std::string(what) + " " + std::to_string(i) + " is " + number_text(x) +
                    ": every value must be finite");
}

void check_runs(const std::vector<Observation>& runs, const char* what, const char* stage) {
  for (size_t i = 0; i < runs.size(); ++i) check_finite(runs[i].value, i, what, stage);
}

void check_options(const BootstrapOptions& o, const char* stage) {
  if (o.resamples < 1)
    throw_error(ErrorCode::kInvalidArgument, stage,
                "resamples must be at least 1, got " + std::to_string(o.resamples));
  if (!(o.level > 0 && o.level < 1))
    throw_error(ErrorCode::kInvalidArgument, stage,
                "level must be in (0, 1), got " + number_text(o.level));
}

double median_unchecked(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lo + hi) / 2;
}

// The median of runs and whether it falls on a censored one (for an even count: either
// of the middle two).
std::pair<double, bool> censored_median(std::vector<Observation> runs) {
  std::sort(runs.begin(), runs.end(), [](const Observation& a, const Observation& b) {
    return a.value < b.value || (a.value == b.value && !a.censored && b.censored);
  });
  const size_t n = runs.size();
  if (n % 2) return {runs[n / 2].value, runs[n / 2].censored};
  const Observation& a = runs[n / 2 - 1];
  const Observation& b = runs[n / 2];
  return {(a.value + b.value) / 2, a.censored || b.censored};
}

double quantile_sorted(const std::vector<double>& sorted, double p) {
  // Nearest rank: the smallest value with at least a fraction p of the values <= it.
  const size_t n = sorted.size();
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

std::vector<double> resampled_medians(const std::vector<Observation>& runs, Rng& rng, int count) {
  std::vector<double> medians;
  medians.reserve(static_cast<size_t>(count));
  std::vector<double> sample(runs.size());
  for (int b = 0; b < count; ++b) {
    for (auto& v : sample) v = runs[rng.uniform(runs.size())].value;
    medians.push_back(median_unchecked(sample));
  }
  return medians;
}

Interval interval_of(std::vector<double> stats, double level) {
  std::sort(stats.begin(), stats.end());
  return {quantile_sorted(stats, (1 - level) / 2), quantile_sorted(stats, (1 + level) / 2)};
}

}  // namespace

double median_of(std::vector<double> v) {
  for (size_t i = 0; i < v.size(); ++i) check_finite(v[i], i, "value", "median_of");
  return median_unchecked(std::move(v));
}

std::optional<MedianEstimate> estimate_median(const std::vector<Observation>& runs,
                                              const BootstrapOptions& o) {
  check_options(o, "estimate_median");
  check_runs(runs, "value", "estimate_median");
  if (runs.empty()) return std::nullopt;
  MedianEstimate e;
  e.n = static_cast<int64_t>(runs.size());
  for (const auto& r : runs) e.censored += r.censored ? 1 : 0;
  std::tie(e.median, e.median_censored) = censored_median(runs);
  Rng rng(o.seed);
  e.ci = interval_of(resampled_medians(runs, rng, o.resamples), o.level);
  return e;
}

std::optional<RatioEstimate> estimate_ratio(const std::vector<Observation>& baseline,
                                            const std::vector<Observation>& cell,
                                            const BootstrapOptions& o) {
  check_options(o, "estimate_ratio");
  check_runs(baseline, "baseline value", "estimate_ratio");
  check_runs(cell, "cell value", "estimate_ratio");
  if (baseline.empty() || cell.empty()) return std::nullopt;
  auto [b, b_cens] = censored_median(baseline);
  auto [c, c_cens] = censored_median(cell);
  if (!(c > 0)) return std::nullopt;
  RatioEstimate e;
  e.ratio = b / c;
  e.censored = b_cens || c_cens;
  Rng rng(o.seed);
  std::vector<double> bm = resampled_medians(baseline, rng, o.resamples);
  std::vector<double> cm = resampled_medians(cell, rng, o.resamples);
  std::vector<double> ratios;
  ratios.reserve(bm.size());
  for (size_t i = 0; i < bm.size(); ++i)
    if (cm[i] > 0) ratios.push_back(bm[i] / cm[i]);
  if (ratios.empty()) return std::nullopt;
  e.ci = interval_of(std::move(ratios), o.level);
  return e;
}

nlohmann::json MedianEstimate::to_json() const {
  return {{"median", median},
          {"ci95", {ci.lo, ci.hi}},
          {"n", n},
          {"censored", censored},
          {"median_censored", median_censored}};
}

nlohmann::json RatioEstimate::to_json() const {
  return {{"ratio", ratio}, {"ci95", {ci.lo, ci.hi}}, {"censored", censored}};
}

}  // namespace dataecho
