#include "dataecho/core/echo_or_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

constexpr const char* kStage = "echo_or_scale";
constexpr double kTie = 1e-9;  // relative: costs or times closer than this are equal
constexpr int64_t kMaxWorkers = 1'000'000;

std::string num(double x, const char* format = "%g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

[[noreturn]] void refuse(const std::string& field, const std::string& what) {
  throw_error(ErrorCode::kInvalidArgument, kStage, field + ": " + what);
}

void check_rate(double x, const std::string& field) {
  if (!std::isfinite(x) || x < 0)
    refuse(field, "expected a rate of 0 or more examples/s, got " + num(x));
}

void check_price(double x, const std::string& field) {
  if (!std::isfinite(x) || x < 0)
    refuse(field, "expected a price per hour of 0 or more, got " + num(x));
}

void check_curve(const std::vector<EchoValuePoint>& curve) {
  double prev_e = 1, prev_v = 1;
  for (size_t i = 0; i < curve.size(); ++i) {
    const std::string field = "echo_value[" + std::to_string(i) + "]";
    const double e = curve[i].factor, v = curve[i].consumed;
    if (!std::isfinite(e) || !std::isfinite(v))
      refuse(field, "expected finite numbers, got (" + num(e) + ", " + num(v) + ")");
    if (i == 0 && e == 1) {
      if (v != 1) refuse(field, "v(1) is 1 by definition, got " + num(v));
      continue;
    }
    if (e <= prev_e)
      refuse(field,
             "the factors must rise from 1, point by point: " + num(e) + " after " + num(prev_e));
    if (v < prev_v)
      refuse(field, "v(" + num(e) + ") = " + num(v) + " is below v(" + num(prev_e) +
                        ") = " + num(prev_v) +
                        ": the curve must not fall (a repeat is worth at most a fresh example; "
                        "read a measured reduction above e as v = 1)");
    if (v > e)
      refuse(field, "v(" + num(e) + ") = " + num(v) +
                        " is above the factor: a repeat worth less than nothing (v(e) = e: "
                        "worth nothing)");
    prev_e = e, prev_v = v;
  }
}

void check_inputs(const EchoOrScaleInputs& in) {
  if (!std::isfinite(in.demand) || in.demand <= 0)
    refuse("demand", "expected a positive rate in examples/s, got " + num(in.demand));
  check_rate(in.local_rate, "local_rate");
  for (size_t i = 0; i < in.worker_rates.size(); ++i)
    check_rate(in.worker_rates[i], "worker_rates[" + std::to_string(i) + "]");
  if (in.worker_rate) check_rate(*in.worker_rate, "worker_rate");
  check_price(in.worker_price_per_hour, "worker_price_per_hour");
  check_price(in.trainer_price_per_hour, "trainer_price_per_hour");
  if (in.worker_price_per_hour == 0 && in.trainer_price_per_hour == 0)
    refuse("trainer_price_per_hour",
           "it and worker_price_per_hour are both 0: nothing to minimise (a trainer price of 1 "
           "and workers at 0 minimise time)");
  if (in.max_workers < 0 || in.max_workers > kMaxWorkers)
    refuse("max_workers", "expected 0 to " + std::to_string(kMaxWorkers) + ", got " +
                              std::to_string(in.max_workers));
  if (!std::isfinite(in.max_factor) || in.max_factor < 1)
    refuse("max_factor", "expected a number of 1 or more (1: no echo), got " + num(in.max_factor));
  check_curve(in.echo_value);
}

// The inputs, checked, with the workers' rates fastest first.
class Model {
 public:
  explicit Model(const EchoOrScaleInputs& in) : in_(in) {
    check_inputs(in);
    std::vector<double> rates = in.worker_rates;
    std::sort(rates.begin(), rates.end(), std::greater<>());
    prefix_.assign(1, 0);
    for (double r : rates) prefix_.push_back(prefix_.back() + r);
    double mean = rates.empty() ? 0 : prefix_.back() / static_cast<double>(rates.size());
    started_rate_ = in.worker_rate.value_or(mean);
  }

  int64_t running() const { return static_cast<int64_t>(prefix_.size()) - 1; }
  double started_rate() const { return started_rate_; }

  // F(n) = min(D, U(n)).
  double fresh_rate(int64_t n) const {
    int64_t k = std::min(n, running());
    double u = in_.local_rate + prefix_[static_cast<size_t>(k)] +
               static_cast<double>(n - k) * started_rate_;
    return std::min(in_.demand, u);
  }

  // The factors worth trying with fresh rate `f` (> 0): 1 and the curve's points, each
  // capped at min(max_factor, D/f), in increasing order, without repeats.
  std::vector<double> factors(double f) const {
    const double cap = std::min(in_.max_factor, in_.demand / f);
    std::vector<double> out = {1};
    for (const auto& p : in_.echo_value) {
      double e = std::min(p.factor, cap);
      if (e > out.back()) out.push_back(e);
      if (p.factor >= cap) break;
    }
    return out;
  }

  EchoOrScaleChoice predict(int64_t n, double e) const;

 private:
  const EchoOrScaleInputs& in_;
  std::vector<double> prefix_;  // prefix_[k]: the k fastest running workers' rates
  double started_rate_ = 0;
};

std::string describe(const EchoOrScaleInputs& in, const EchoOrScaleChoice& c) {
  std::string s = echo_or_scale_regime_name(c.regime);
  if (c.workers == 0 && c.factor == 1 && c.fresh_rate >= in.demand)
    return s + ": the local CPUs' " + num(in.local_rate) + " examples/s meet the demand of " +
           num(in.demand) + "/s: no workers, no echo";
  s += ": " + std::to_string(c.workers) + (c.workers == 1 ? " worker" : " workers") + " and echo " +
       num(c.factor, "%.3g") + " give " + num(c.fresh_rate, "%.4g") +
       " fresh examples/s toward a demand of " + num(in.demand) + "/s (R " +
       num(in.demand / c.fresh_rate, "%.3g") + ")";
  if (c.relative_time)
    s += ", time x" + num(*c.relative_time, "%.3g") + " of no workers and no echo";
  else
    s += "; the local CPUs alone (" + num(in.local_rate) + "/s) never get there";
  return s;
}

EchoOrScaleChoice Model::predict(int64_t n, double e) const {
  EchoOrScaleChoice c;
  c.workers = n;
  c.factor = e;
  c.fresh_rate = fresh_rate(n);
  c.consumed_rate = std::min(in_.demand, e * c.fresh_rate);
  const double inf = std::numeric_limits<double>::infinity();
  if (c.consumed_rate > 0) {
    c.seconds_per_example = echo_value_at(in_.echo_value, e) / c.consumed_rate;
    c.cost_per_example =
        c.seconds_per_example *
        (in_.trainer_price_per_hour + static_cast<double>(n) * in_.worker_price_per_hour) / 3600;
  } else {
    c.seconds_per_example = c.cost_per_example = inf;
  }
  // T(0, 1) per example is 1 / min(D, L).
  const double base = std::min(in_.demand, in_.local_rate);
  if (base > 0) c.relative_time = c.seconds_per_example * base;
  c.regime = e * c.fresh_rate >= in_.demand * (1 - kTie) ? EchoOrScaleRegime::kStepBound
                                                         : EchoOrScaleRegime::kInputBound;
  c.reason = describe(in_, c);
  return c;
}

bool close(double a, double b) {
  return std::abs(a - b) <= kTie * std::max(std::abs(a), std::abs(b));
}

// Is `c` better than `best`: cheaper, or as cheap and sooner. The search goes through n
// and e in increasing order, so that an equal choice found later (more workers, a larger
// factor) never replaces one found earlier.
bool better(const EchoOrScaleChoice& c, const std::optional<EchoOrScaleChoice>& best) {
  if (!std::isfinite(c.seconds_per_example)) return false;
  if (!best) return true;
  if (close(c.cost_per_example, best->cost_per_example))
    return c.seconds_per_example < best->seconds_per_example &&
           !close(c.seconds_per_example, best->seconds_per_example);
  return c.cost_per_example < best->cost_per_example;
}

// How much `other` costs relative to `c` ("x1.52"), or that it never gets there.
std::string cost_ratio(const std::optional<EchoOrScaleChoice>& other, const EchoOrScaleChoice& c) {
  if (!other) return "never gets there";
  if (c.cost_per_example == 0)  // the trainer free: choices without workers cost 0
    return other->cost_per_example == 0 ? "would cost as much" : "would cost more";
  return "would cost x" + num(other->cost_per_example / c.cost_per_example, "%.3g");
}

}  // namespace

std::vector<EchoValuePoint> default_echo_value() {
  // At each factor the largest v (the least a repeat is worth) among three sources:
  // - The image protocol (docs/results.md, "Fresh examples to target: the sweep" and "Each
  //   cell at its own best budget"), example echoing before augmentation with a shuffle
  //   of 1,000 after it. The sweep's reductions at e = 2 and 3 exceed e (2.22x, 3.52x:
  //   v below 1, read as 1); at each cell's own best budget e = 4 needs 3.66x and e = 5
  //   4.33x fewer fresh examples than the baseline (first touch): v = 1.093 and 1.155.
  // - The language model (docs/results.md, "The language model"), echo before `pack` with
  //   a shuffle of 100 after it: 1.84x at e = 2 and 3.29x at e = 4 (ten seeds each),
  //   2.56x at e = 3 (five), so v = 1.087, 1.172 and 1.216. No cell ran at e = 5.
  // - Muennighoff et al. 2023, "Scaling Data-Constrained Language Models": data seen 2
  //   times are worth about 98% of as much fresh data, 4 times about 93% (v = 1.020 and
  //   1.075; their fit gives 1.105 at 5 times).
  // The language model's is the largest wherever it ran. At e = 5, where it did not: its
  // v(4) plus the image protocol's rise from e = 4 to 5 (1.155 - 1.093 = 0.062).
  const double lm4 = 4 / 3.29;
  return {{2, 2 / 1.84}, {3, 3 / 2.56}, {4, lm4}, {5, lm4 + (5 / 4.33 - 4 / 3.66)}};
}

double echo_value_at(const std::vector<EchoValuePoint>& curve, double factor) {
  double e0 = 1, v0 = 1;
  for (const auto& p : curve) {
    if (factor <= p.factor) {
      if (p.factor == e0) return v0;  // a point (1, 1) given
      return v0 + (p.consumed - v0) * (factor - e0) / (p.factor - e0);
    }
    e0 = p.factor, v0 = p.consumed;
  }
  return v0 + (factor - e0);  // beyond the last point a repeat is worth nothing
}

const char* echo_or_scale_regime_name(EchoOrScaleRegime r) {
  return r == EchoOrScaleRegime::kStepBound ? "step-bound" : "input-bound";
}

EchoOrScaleChoice echo_or_scale(const EchoOrScaleInputs& in) {
  const Model m(in);
  std::optional<EchoOrScaleChoice> best, workers_only, echo_only;
  // Echo only: the fewest workers that give a fresh rate (none where the local CPUs do).
  std::optional<int64_t> echo_only_n;
  for (int64_t n = 0; n <= in.max_workers; ++n) {
    const double f = m.fresh_rate(n);
    if (f > 0) {
      if (!echo_only_n) echo_only_n = n;
      for (double e : m.factors(f)) {
        auto c = m.predict(n, e);
        if (better(c, best)) best = c;
        if (e == 1 && better(c, workers_only)) workers_only = c;
        if (n == *echo_only_n && better(c, echo_only)) echo_only = std::move(c);
      }
    }
    if (f >= in.demand) break;  // a further worker adds cost and no fresh rate
    if (n >= m.running() && m.started_rate() == 0) break;  // nor here
  }
  if (!best)
    refuse("local_rate", "0, and no worker can add a rate (max_workers " +
                             std::to_string(in.max_workers) + "; " + std::to_string(m.running()) +
                             " running, a started one at " + num(m.started_rate()) +
                             "/s): nothing reaches the target");
  best->reason += "; workers only " + cost_ratio(workers_only, *best) + ", echo only " +
                  cost_ratio(echo_only, *best);
  return *best;
}

EchoOrScaleChoice predict_echo_or_scale(const EchoOrScaleInputs& in, int64_t workers,
                                        double factor) {
  const Model m(in);
  if (workers < 0 || workers > kMaxWorkers)
    refuse("workers",
           "expected 0 to " + std::to_string(kMaxWorkers) + ", got " + std::to_string(workers));
  if (!std::isfinite(factor) || factor < 1)
    refuse("factor", "expected a number of 1 or more, got " + num(factor));
  return m.predict(workers, factor);
}

// ---------------------------------------------------------------- EchoOrScaleDecider

namespace {

EchoOrScaleDeciderOptions checked(EchoOrScaleDeciderOptions o) {
  if (!(o.min_gain >= 0 && o.min_gain < 1))
    throw_error(ErrorCode::kInvalidArgument, kStage,
                "min_gain: expected a share in [0, 1), got " + num(o.min_gain));
  if (!std::isfinite(o.min_interval_s) || o.min_interval_s < 0)
    throw_error(ErrorCode::kInvalidArgument, kStage,
                "min_interval_s: expected 0 or more seconds, got " + num(o.min_interval_s));
  if (!o.clock) o.clock = Clock::real();
  return o;
}

std::string label(const EchoOrScaleChoice& c) {
  return std::to_string(c.workers) + (c.workers == 1 ? " worker" : " workers") + " and echo " +
         num(c.factor, "%.3g");
}

// Where `best` and `current` cost the same (the trainer free, no workers), the gain is in
// time.
bool same_cost(const EchoOrScaleChoice& best, const EchoOrScaleChoice& current) {
  return close(best.cost_per_example, current.cost_per_example);
}

// The share by which `best` is cheaper than `current` (sooner, where they cost the same).
double gain(const EchoOrScaleChoice& best, const EchoOrScaleChoice& current) {
  if (same_cost(best, current)) return 1 - best.seconds_per_example / current.seconds_per_example;
  return 1 - best.cost_per_example / current.cost_per_example;
}

}  // namespace

EchoOrScaleDecider::EchoOrScaleDecider(EchoOrScaleDeciderOptions options)
    : options_(checked(std::move(options))), clock_(options_.clock) {}

EchoOrScaleDecision EchoOrScaleDecider::decide(const EchoOrScaleInputs& in) {
  auto best = echo_or_scale(in);  // checks the inputs before anything changes
  const int64_t now = clock_->now_ns();
  if (!current_) {
    current_ = best;
    switched_ns_ = now;
    return {best, best, true, "first decision: " + label(best)};
  }
  return keep_or_switch(in, std::move(best), now);
}

EchoOrScaleDecision EchoOrScaleDecider::keep_or_switch(const EchoOrScaleInputs& in,
                                                       EchoOrScaleChoice best, int64_t now) {
  auto current = predict_echo_or_scale(in, current_->workers, current_->factor);
  const std::string was = label(current);
  auto keep = [&](std::string why) {
    current_ = current;
    return EchoOrScaleDecision{current, std::move(best), false, "kept " + was + ": " + why};
  };
  auto take = [&](std::string why) {
    current_ = best;
    switched_ns_ = now;
    return EchoOrScaleDecision{best, best, true, "switched from " + was + ": " + why};
  };
  if (best.workers == current.workers && close(best.factor, current.factor))
    return keep("it is the best choice");
  if (current.workers > in.max_workers || current.factor > in.max_factor)
    return take("it is outside the limits now (max_workers " + std::to_string(in.max_workers) +
                ", max_factor " + num(in.max_factor) + ")");
  if (!std::isfinite(current.seconds_per_example)) return take("it no longer reaches the target");
  const double g = gain(best, current);
  const std::string cheaper =
      label(best) + (same_cost(best, current) ? " would take " : " would cost ") +
      num(100 * g, "%.1f") + (same_cost(best, current) ? "% less time" : "% less");
  if (!(g >= options_.min_gain))
    return keep(cheaper + ", under the " + num(100 * options_.min_gain, "%.0f") +
                "% a switch needs");
  const double since_s = static_cast<double>(now - switched_ns_) / 1e9;
  if (since_s < options_.min_interval_s)
    return keep(cheaper + ", but the last switch was " + num(since_s, "%.0f") +
                " s ago (at most one per " + num(options_.min_interval_s) + " s)");
  return take(cheaper);
}

}  // namespace dataecho
