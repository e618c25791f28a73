#include "dataecho/core/autoscale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numeric>
#include <utility>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

constexpr double kWaits = 0.05;  // the consumer waits: as the tuner's "keeps up" rule

std::string scale_num(double x, const char* format = "%g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// A rate with thousands separated: "1,200".
std::string rate(double x) {
  if (!(x >= 1000)) return scale_num(x, x < 10 ? "%.3g" : "%.0f");
  std::string digits = scale_num(std::round(x), "%.0f"), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

[[noreturn]] void refuse_scale(const std::string& path, const std::string& what) {
  throw_error(ErrorCode::kInvalidArgument, "scale", path + "." + what);
}

void check_seconds(double x, const std::string& path, const char* field, bool positive) {
  if (!std::isfinite(x) || x < 0 || (positive && x == 0))
    refuse_scale(path, std::string(field) + ": expected " +
                           (positive ? "more than 0" : "0 or more") + " seconds, got " +
                           scale_num(x));
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

void check_scale_options(const ScaleOptions& o, const std::string& path) {
  if (o.policy != "fixed" && o.policy != "workers" && o.policy != "echo_or_scale")
    refuse_scale(path, "policy: expected \"fixed\", \"workers\" or \"echo_or_scale\", got \"" +
                           o.policy + "\"");
  if (o.max_workers < 1 || o.max_workers > 1'000'000)
    refuse_scale(path, "max_workers: expected 1 to 1000000, got " + std::to_string(o.max_workers));
  if (!(o.min_gain >= 0 && o.min_gain < 10))
    refuse_scale(path, "min_gain: expected a share of 0 or more, got " + scale_num(o.min_gain));
  if (!(o.switch_gain >= 0 && o.switch_gain < 1))
    refuse_scale(path, "switch_gain: expected a share in [0, 1), got " + scale_num(o.switch_gain));
  check_seconds(o.min_interval_s, path, "min_interval_s", false);
  check_seconds(o.measure_s, path, "measure_s", true);
  check_seconds(o.settle_s, path, "settle_s", true);
  check_seconds(o.start_timeout_s, path, "start_timeout_s", true);
  check_seconds(o.retry_after_s, path, "retry_after_s", false);
  // The prices and the curve as the model checks them, on inputs that are otherwise fine.
  EchoOrScaleInputs in;
  in.demand = 1;
  in.worker_rates = {1};
  in.worker_price_per_hour = o.worker_price_per_hour;
  in.trainer_price_per_hour = o.trainer_price_per_hour;
  in.echo_value = o.echo_value;
  try {
    echo_or_scale(in);
  } catch (const Error& e) {
    refuse_scale(path, e.message());
  }
}

namespace {

ScaleOptions checked(ScaleOptions o, const std::shared_ptr<WorkerScaler>& scaler) {
  check_scale_options(o, "scale");
  if (o.policy == "fixed")
    throw_error(ErrorCode::kInvalidArgument, "scale", "policy \"fixed\" changes nothing");
  if (!scaler) throw_error(ErrorCode::kInvalidArgument, "scale", "no WorkerScaler given");
  return o;
}

EchoOrScaleDeciderOptions decider_options(const ScaleOptions& o,
                                          std::shared_ptr<const Clock> clock) {
  EchoOrScaleDeciderOptions d;
  d.min_gain = o.switch_gain;
  d.min_interval_s = o.min_interval_s;
  d.clock = std::move(clock);
  return d;
}

// The echo's cap for the model's factor: rounded up (adaptive echo repeats only while fresh
// elements are late, up to the cap), within [1, max].
int64_t cap_of(double factor, int64_t max) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(factor - 1e-9)), 1, max);
}

}  // namespace

ScalePolicy::ScalePolicy(ScaleOptions options, std::shared_ptr<WorkerScaler> scaler)
    : o_(checked(std::move(options), scaler)),
      scaler_(std::move(scaler)),
      clock_(std::make_shared<ManualClock>()),
      decider_(decider_options(o_, clock_)) {}

void ScalePolicy::set_workers(int64_t n, const std::string& reason) {
  scaler_->set_workers(n, reason);
  std::lock_guard lock(mu_);
  workers_ = n;
}

int64_t ScalePolicy::found_workers(const WorkerScaler::Rates& rates) {
  std::lock_guard lock(mu_);
  rates_ = rates.rates;
  if (!workers_) workers_ = rates.serving;
  return *workers_;
}

void ScalePolicy::record(const ScaleWindow& w, ScaleStep& s, const std::string& detail) {
  s.line = std::string(o_.policy == "workers" ? "workers" : "echo-or-scale") + " " +
           scale_num(w.t_s, "%.1f") + " s: workers " + std::to_string(s.workers_from) + " -> " +
           std::to_string(s.workers_to);
  if (sets_echo())
    s.line += ", echo cap " + std::to_string(s.cap_from) + " -> " + std::to_string(s.cap_to);
  s.line += " (" + detail + ")";
  std::lock_guard lock(mu_);
  reason_ = s.reason;
  decisions_.push_back(s.line);
}

ScaleStep ScalePolicy::step(const ScaleWindow& w) {
  clock_->advance(static_cast<int64_t>(w.t_s * 1e9) - clock_->now_ns());
  if (!started_) {
    started_ = true;
    base_elements_ = w.source_elements;
    base_s_ = w.t_s;
    span_elements_ = w.demand_elements;
    ScaleStep s;
    s.cap_from = s.cap_to = w.echo_cap;
    return s;
  }
  try {
    return o_.policy == "workers" ? workers_step(w) : echo_or_scale_step(w);
  } catch (const std::exception& e) {
    ScaleStep s;
    s.cap_from = s.cap_to = w.echo_cap;
    s.workers_from = s.workers_to = workers_.value_or(0);
    s.reason = std::string("the workers could not be had or set: ") + e.what();
    std::lock_guard lock(mu_);
    if (reason_ != s.reason) decisions_.push_back(s.reason);
    reason_ = s.reason;
    return s;
  }
}

// ---------------------------------------------------------------- workers (Cachew's rule)

ScaleStep ScalePolicy::workers_step(const ScaleWindow& w) {
  ScaleStep s;
  s.cap_from = s.cap_to = w.echo_cap;
  s.workers_from = s.workers_to = workers_.value_or(0);
  if (trial_) return judge_trial(w, s);
  const double since = w.t_s - base_s_;
  if (w.consumer_wait < kWaits || w.t_s < blocked_until_s_ || since < o_.settle_s) return s;
  const int64_t n = found_workers(scaler_->worker_rates());
  s.workers_from = s.workers_to = n;
  if (n >= o_.max_workers) return s;
  const double before = static_cast<double>(w.source_elements - base_elements_) / since;
  trial_ = Trial{n, n + 1, w.t_s, before, std::nullopt, 0};
  s.workers_to = n + 1;
  s.reason =
      "consumer waits " + scale_num(100 * w.consumer_wait, "%.0f") + "% of the time: a worker more";
  set_workers(s.workers_to, "scale workers: " + s.reason);
  record(w, s,
         "source " + rate(before) + "/s; " + s.reason + ", kept if the source's rate rises " +
             scale_num(100 * o_.min_gain, "%.0f") + "%");
  return s;
}

ScaleStep ScalePolicy::judge_trial(const ScaleWindow& w, ScaleStep s) {
  Trial& t = *trial_;
  if (!t.serving_s) {
    const WorkerScaler::Rates rates = scaler_->worker_rates();
    found_workers(rates);
    if (rates.serving >= t.to) {
      t.serving_s = w.t_s;
      t.serving_elements = w.source_elements;
      return s;
    }
    if (w.t_s - t.started_s < o_.start_timeout_s) return s;
  } else if (w.t_s - *t.serving_s < o_.settle_s) {
    return s;
  }
  const double after = t.serving_s ? static_cast<double>(w.source_elements - t.serving_elements) /
                                         (w.t_s - *t.serving_s)
                                   : 0;
  const bool keep = t.serving_s && after >= t.rate_before * (1 + o_.min_gain);
  const std::string rates = "source " + rate(t.rate_before) + " -> " + rate(after) + "/s";
  if (keep) {
    s.reason = "kept: " + rates;
  } else {
    s.workers_to = t.from;
    s.reason =
        (t.serving_s ? "taken back: " + rates
                     : "taken back: not serving within " + scale_num(o_.start_timeout_s) + " s") +
        "; no worker added for " + scale_num(o_.retry_after_s) + " s";
    set_workers(t.from, "scale workers: " + s.reason);
    blocked_until_s_ = w.t_s + o_.retry_after_s;
  }
  trial_.reset();
  base_elements_ = w.source_elements;
  base_s_ = w.t_s;
  record(w, s, s.reason);
  return s;
}

// ---------------------------------------------------------------- echo or scale

ScaleStep ScalePolicy::echo_or_scale_step(const ScaleWindow& w) {
  ScaleStep s;
  s.cap_from = s.cap_to = w.echo_cap;
  s.workers_from = s.workers_to = workers_.value_or(0);
  const std::optional<double> demand = measure_demand(w);
  if (!demand) return s;
  const WorkerScaler::Rates rates = scaler_->worker_rates();
  s.workers_from = s.workers_to = found_workers(rates);
  {
    std::lock_guard lock(mu_);
    demand_ = *demand;
  }
  if (rates.rates.empty() || *std::max_element(rates.rates.begin(), rates.rates.end()) <= 0)
    return s;  // no worker measured yet
  EchoOrScaleInputs in;
  in.demand = *demand;
  in.worker_rates = rates.rates;
  in.worker_price_per_hour = o_.worker_price_per_hour;
  in.trainer_price_per_hour = o_.trainer_price_per_hour;
  in.max_workers = o_.max_workers;
  in.max_factor = static_cast<double>(std::max<int64_t>(1, w.echo_max));
  in.echo_value = o_.echo_value;
  return apply_choice(w, decider_.decide(in), *demand, rates);
}

std::optional<double> ScalePolicy::measure_demand(const ScaleWindow& w) {
  // The first span begins after the window in which the demand node gave its first
  // element: the trainer's start-up and its first step are not its pace.
  if (!consuming_) {
    consuming_ = w.demand_elements > span_elements_;
    span_elements_ = w.demand_elements;
    return std::nullopt;
  }
  span_s_ += w.dt_s;
  span_wait_s_ += w.demand_wait_s;
  const int64_t elements = w.demand_elements - span_elements_;
  const double busy = span_s_ - span_wait_s_;
  // A span grows until it is measure_s long and holds 10 elements and a quarter of
  // measure_s of the consumer's time outside next() (a consumer that waits nearly all
  // the time is measured over a longer span, not on a few elements).
  if (span_s_ < o_.measure_s || elements < 10 || busy < o_.measure_s / 4) return std::nullopt;
  spans_.push_back({w.t_s, busy, elements});
  span_s_ = span_wait_s_ = 0;
  span_elements_ = w.demand_elements;
  // D over the spans that ended within the last min_interval_s (the latest at least): the
  // trainer's pace between two switches, not one span's.
  while (spans_.size() > 1 && spans_.front().end_s <= w.t_s - o_.min_interval_s) spans_.pop_front();
  double busy_s = 0, count = 0;
  for (const Span& sp : spans_) busy_s += sp.busy_s, count += static_cast<double>(sp.elements);
  return count / busy_s;
}

ScaleStep ScalePolicy::apply_choice(const ScaleWindow& w, const EchoOrScaleDecision& d,
                                    double demand, const WorkerScaler::Rates& rates) {
  ScaleStep s;
  s.workers_from = found_workers(rates);
  s.workers_to = d.choice.workers;
  s.cap_from = w.echo_cap;
  s.cap_to = cap_of(d.choice.factor, std::max<int64_t>(1, w.echo_max));
  s.reason = d.reason + "; " + d.choice.reason;
  // No local rate is by design: the model's remark on it says nothing here.
  const std::string local = "; the local CPUs alone (0/s) never get there";
  if (const size_t at = s.reason.find(local); at != std::string::npos)
    s.reason.erase(at, local.size());
  std::optional<double> old_factor;
  {
    std::lock_guard lock(mu_);
    old_factor = factor_;
    factor_ = d.choice.factor;
    reason_ = s.reason;
  }
  if (s.workers_to != s.workers_from) set_workers(s.workers_to, "echo or scale: " + d.reason);
  if (!s.changed() && !d.switched) return s;
  std::string detail = "factor " +
                       (old_factor ? scale_num(*old_factor, "%.3g") : std::string("-")) + " -> " +
                       scale_num(d.choice.factor, "%.3g") + ", D " + rate(demand) + "/s, workers " +
                       rate(mean(rates.rates)) + "/s each (" + std::to_string(rates.rates.size()) +
                       " measured); " + s.reason;
  record(w, s, detail);
  return s;
}

// ---------------------------------------------------------------- report

nlohmann::json ScalePolicy::report() const {
  std::lock_guard lock(mu_);
  const auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"policy", o_.policy},    {"workers", opt(workers_)}, {"factor", opt(factor_)},
          {"demand", opt(demand_)}, {"worker_rates", rates_},   {"reason", reason_},
          {"decisions", decisions_}};
}

std::vector<std::pair<std::string, double>> ScalePolicy::stats_values() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, double>> v;
  if (workers_) v.emplace_back("scale_workers", static_cast<double>(*workers_));
  if (factor_) v.emplace_back("scale_factor", *factor_);
  if (demand_) v.emplace_back("scale_demand", *demand_);
  if (!rates_.empty()) v.emplace_back("scale_worker_rate", mean(rates_));
  v.emplace_back("scale_decisions", static_cast<double>(decisions_.size()));
  return v;
}

}  // namespace dataecho
