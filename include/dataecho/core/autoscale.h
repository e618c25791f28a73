// The data service's decision loop (docs/service.md, "Echo or scale"): a service source
// with a `"scale"` policy lets the pipeline's tuner change the number of the service's
// workers, and with policy "echo_or_scale" the cap of the tuned echo downstream too.
// ScalePolicy holds the decisions; the tuner (core/tuner.h) feeds it one ScaleWindow per
// window of its own, sets the echo's knob to the cap it returns, and reports each step;
// the workers change through a WorkerScaler (the service layer's asks the dispatcher:
// SetWorkers and Status; tests give a fake).
//
// The policies:
// - "fixed": nothing changes the workers (ScalePolicy is not made).
// - "workers" (Cachew's rule): while the pipeline's consumer waits 5% of the time or more,
//   add a worker (SetWorkers n + 1); once it serves and settle_s have passed, keep it if
//   the service source's rate rose by at least min_gain over its rate before, else take
//   it back (SetWorkers n) and add none for retry_after_s (then try again: the load may
//   have changed). A worker not serving within start_timeout_s is taken back the same
//   way. It never lowers the workers below where it found them.
// - "echo_or_scale": it measures the demand D (the elements the demand node gives per
//   second of its consumer's time outside its next(): the consumer's pace when it never
//   waits; the demand node is the tuned echo, else the source) over spans of at least
//   measure_s, each with 10 elements and measure_s / 4 of that time or more, from after
//   the window of the demand node's first element (the trainer's start-up is not its
//   pace); D is taken over the spans of the last min_interval_s. At each span's end it
//   asks the dispatcher for the serving workers' rates, and feeds them to an
//   EchoOrScaleDecider (core/echo_or_scale.h: local_rate 0, the options' prices, limits
//   and curve, the echo's max as max_factor; no echo: 1). Its choice is applied: the
//   workers (SetWorkers, when the number changes) and the echo's cap (the factor rounded
//   up: adaptive echo repeats only while fresh elements are late, so it repeats up to
//   the factor where fresh elements come at D / factor).
// Thread-safety: step() from one thread at a time (the tuner's); report() from any.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/clock.h"
#include "dataecho/core/echo_or_scale.h"

namespace dataecho {

struct ScaleOptions {
  std::string policy = "fixed";  // "fixed", "workers" or "echo_or_scale"
  int64_t max_workers = 4;       // the most workers either policy sets
  // echo_or_scale: the prices (per hour, any one unit) and the value curve (v(e) points).
  double worker_price_per_hour = 0;
  double trainer_price_per_hour = 1;
  std::vector<EchoValuePoint> echo_value = default_echo_value();
  double switch_gain = 0.10;   // echo_or_scale: a switch saves at least this share
  double min_interval_s = 60;  // echo_or_scale: at most one switch per this many seconds
  double measure_s = 2;        // echo_or_scale: D measured over at least this long
  double min_gain = 0.05;      // workers: a worker is kept when the source's rate rose this much
  // workers: a new worker judged this long after it serves (a static merge's rate over a
  // few seconds swings many-fold with the pieces' turns)
  double settle_s = 10;
  double start_timeout_s = 60;  // workers: a worker not serving by then is taken back
  double retry_after_s = 120;   // workers: no worker added for this long after a take-back
};

// Refuses bad options (an Error, kInvalidArgument, naming `path` and the field).
void check_scale_options(const ScaleOptions& o, const std::string& path);

// The service's workers, as the decision loop sees them.
class WorkerScaler {
 public:
  struct Rates {
    int64_t serving = 0;        // workers serving now (alive and not leaving)
    std::vector<double> rates;  // their measured rates, elements/s (those measured: > 0)
  };
  virtual ~WorkerScaler() = default;
  // Asks for `n` serving workers; `reason` as the dispatcher's status shows it.
  virtual void set_workers(int64_t n, const std::string& reason) = 0;
  virtual Rates worker_rates() = 0;
};

// One tuner window, as the decision loop reads it.
struct ScaleWindow {
  double t_s = 0;               // its end, in seconds on the tuner's clock
  double dt_s = 0;              // its length
  double consumer_wait = 0;     // the share of it the pipeline's consumer waited in next()
  int64_t source_elements = 0;  // the service source's elements so far
  int64_t demand_elements = 0;  // the demand node's (the tuned echo, else the source) so far
  double demand_wait_s = 0;     // the pipeline's consumer's time inside its next() over the window
  int64_t echo_cap = 1;         // the tuned echo's cap on copies now, and its max (1: no echo)
  int64_t echo_max = 1;
};

// What a step did.
struct ScaleStep {
  int64_t workers_from = 0, workers_to = 0;  // equal: unchanged
  int64_t cap_from = 1, cap_to = 1;          // the echo's cap: the tuner sets it
  bool changed() const { return workers_from != workers_to || cap_from != cap_to; }
  // "echo-or-scale 12.0 s: workers 1 -> 2, factor 4 -> 2 (D 1,200/s, ...; reason)",
  // set when something changed (and for a trial kept).
  std::string line;
  std::string reason;
};

class ScalePolicy {
 public:
  // Throws on bad options or a null scaler; policy "fixed" is refused (nothing to do).
  ScalePolicy(ScaleOptions options, std::shared_ptr<WorkerScaler> scaler);

  const ScaleOptions& options() const { return o_; }
  // Whether it sets the tuned echo's cap (then the tuner's own rules leave it alone).
  bool sets_echo() const { return o_.policy == "echo_or_scale"; }

  // One window. Calls the scaler; an error of the scaler (the dispatcher unreachable) is
  // reported in the step's reason and tried again at the next window.
  ScaleStep step(const ScaleWindow& w);

  // {"policy", "workers" (the number set; null: none yet), "factor" (the model's; null),
  //  "demand" (D, elements/s; null), "worker_rates", "reason" (the last decision's),
  //  "decisions": [lines]}
  nlohmann::json report() const;
  // The values for a node's stats: workers, factor, demand, worker rate (the mean).
  std::vector<std::pair<std::string, double>> stats_values() const;

 private:
  ScaleStep workers_step(const ScaleWindow& w);
  ScaleStep judge_trial(const ScaleWindow& w, ScaleStep s);
  ScaleStep echo_or_scale_step(const ScaleWindow& w);
  // D, once a span is complete (measure_demand's rules); none before.
  std::optional<double> measure_demand(const ScaleWindow& w);
  ScaleStep apply_choice(const ScaleWindow& w, const EchoOrScaleDecision& d, double demand,
                         const WorkerScaler::Rates& rates);
  void set_workers(int64_t n, const std::string& reason);
  // The workers set, or (the first time) those serving; keeps the rates for report().
  int64_t found_workers(const WorkerScaler::Rates& rates);
  void record(const ScaleWindow& w, ScaleStep& s, const std::string& detail);

  const ScaleOptions o_;
  const std::shared_ptr<WorkerScaler> scaler_;
  const std::shared_ptr<ManualClock> clock_;  // the decider's: the windows' time
  EchoOrScaleDecider decider_;
  bool started_ = false;
  std::optional<int64_t> workers_;  // the number set, or found serving at the first step
  // workers: the source's elements and the time at the last change (its rate since),
  // a trial pending, and until when nothing is added.
  int64_t base_elements_ = 0;
  double base_s_ = 0;
  struct Trial {
    int64_t from = 0, to = 0;
    double started_s = 0;
    double rate_before = 0;
    std::optional<double> serving_s;  // when `to` workers served
    int64_t serving_elements = 0;
  };
  std::optional<Trial> trial_;
  double blocked_until_s_ = -1;
  // echo_or_scale: the span D is being measured over (from after the demand node's first
  // element), and the spans that ended within the last min_interval_s.
  bool consuming_ = false;
  double span_s_ = 0, span_wait_s_ = 0;
  int64_t span_elements_ = 0;
  struct Span {
    double end_s = 0, busy_s = 0;
    int64_t elements = 0;
  };
  std::deque<Span> spans_;
  mutable std::mutex mu_;  // guards what report() reads
  std::optional<double> factor_, demand_;
  std::vector<double> rates_;
  std::string reason_;
  std::vector<std::string> decisions_;
};

}  // namespace dataecho
