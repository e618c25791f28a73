// The statistics of the experiment protocol (docs/protocol.md): medians over seeds with
// runs that never reached the target counted at their budget (right-censored), and 95%
// intervals by the bootstrap percentile method, for one cell's figure and for the ratio
// of a baseline's median to a cell's (fresh-example reduction, wall-clock speedup).
// The trainer's reports and the Python package (dataecho.stats) both use these.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace dataecho {

// One run's figure: the value to target, or (censored) the value its budget ran out at:
// the target is reached later than that, if ever.
struct Observation {
  double value = 0;
  bool censored = false;
};

struct Interval {
  double lo = 0, hi = 0;
};

// A median over seeds with its bootstrap interval. Censored runs enter at their budget,
// which can only make the median smaller than the truth; `median_censored` says the
// median itself sits on a censored run (then it is a lower bound, shown as ">= x").
struct MedianEstimate {
  double median = 0;
  Interval ci;
  int64_t n = 0;
  int64_t censored = 0;
  bool median_censored = false;
  nlohmann::json to_json() const;
};

// A ratio of medians, baseline over cell (reduction or speedup: > 1 is better), with its
// bootstrap interval; `censored` when either median is censored (the ratio is then
// bounded on one side only).
struct RatioEstimate {
  double ratio = 0;
  Interval ci;
  bool censored = false;
  nlohmann::json to_json() const;
};

// Checked by the estimates: resamples >= 1 and 0 < level < 1, else an Error
// (kInvalidArgument) naming the function and the option.
struct BootstrapOptions {
  int resamples = 10000;
  double level = 0.95;
  uint64_t seed = 20190715;  // fixed: the report is a function of the run files alone
};

// The median of the values (the mean of the middle two for an even count). Empty: 0.
// A value that is not finite is an Error (kInvalidArgument), here and in the estimates.
double median_of(std::vector<double> values);

// Percentile bootstrap: resample the observations with replacement `resamples` times,
// take the median of each, and report the (1-level)/2 and (1+level)/2 quantiles of those
// medians (nearest rank). Empty input: nullopt.
std::optional<MedianEstimate> estimate_median(const std::vector<Observation>& runs,
                                              const BootstrapOptions& options = {});

// median(baseline) / median(cell), each side resampled independently per resample, the
// baseline's resamples first, then the cell's, from one stream. nullopt when either side
// is empty, the cell's median is not above 0, or no resampled cell median is.
std::optional<RatioEstimate> estimate_ratio(const std::vector<Observation>& baseline,
                                            const std::vector<Observation>& cell,
                                            const BootstrapOptions& options = {});

}  // namespace dataecho
