// Echo or scale: when the input pipeline cannot keep up with the trainer, two levers close
// the gap. Workers (processes of the data service) add fresh examples and cost money;
// echo repeats examples the trainer already has and costs repeats, each worth a little
// less than a fresh example. echo_or_scale() chooses the number of workers n and the echo
// factor e that minimise the predicted cost to the target, from rates measured while the
// job runs, prices, limits and the measured value of echo; EchoOrScaleDecider re-decides
// as the rates change, with hysteresis. docs/echo.md, "Echo or scale: the model".
//
// The model. Let N1 be the examples the trainer consumes to reach the target without
// echo (its steps times its batch). The trainer consumes at most D examples/s (`demand`:
// its pace when it never waits). The upstream offers U(n) = L + the rates of n workers
// fresh examples/s (L: `local_rate`, the trainer's own CPUs); the trainer takes at most
// D of them, so the fresh rate is F(n) = min(D, U(n)). Echo at factor e emits each fresh
// example e times on average: the trainer is offered e*F examples/s and consumes
//   C(n, e) = min(D, e*F(n)),
// a share 1/e of them fresh, so it consumes min(F, D/e) fresh examples/s.
// To reach the target at factor e it must consume N1*v(e) examples, where v is the value
// curve (`echo_value`): v(1) = 1; v(e) = 1 when a repeat is worth a fresh example,
// v(e) = e when it is worth nothing; non-decreasing, and never above e. It is the measured
// reduction read the other way: v(e) = e * fresh_needed(e) / fresh_needed(1) = e / r(e),
// with r(e) the "fewer fresh examples" of docs/results.md. Fresh examples needed:
// N1*v(e)/e. Time to the target:
//   T(n, e) = N1*v(e) / C(n, e) = (N1*v(e)/e) / min(F(n), D/e).
// With R = D/F(n) (the ratio docs/results.md measures):
// - e <= R: C = e*F and T = N1 * (v(e)/e) / F: echo helps while v(e)/e falls.
// - e >= R: C = D and T = N1*v(e)/D, non-decreasing in e: repeats beyond R buy no time.
//   The speedup over e = 1 is T(n,1)/T(n,e) = min(e, R)/v(e): docs/results.md's
//   min(e, R) rule, divided by what the repeats cost.
// - F(n) grows with n until U(n) >= D; from there a worker adds cost and no fresh rate.
// Cost to the target = T * (trainer_price_per_hour + n*worker_price_per_hour) / 3600.
//
// The search. n runs over [0, max_workers] and stops where F reaches D (a further
// worker can only cost more). For a fixed n the cost is proportional to T, and on each
// linear piece of v, v(e)/e = a/e + b is monotone, so its minimum over
// [1, min(max_factor, R)] lies at a point of the curve or at that cap: the factors tried
// are 1 and the curve's points, each capped at min(max_factor, R) (exact, not a grid
// search). Beyond its last point the curve rises with slope 1 (a repeat beyond the
// measured ones counts as worth nothing), where v(e)/e only rises. Ties (within a relative
// 1e-9, so that rounding decides nothing): the lower predicted time, then fewer workers,
// then the smaller factor. Workers are taken fastest first: n workers are the n fastest
// of `worker_rates`, then as many started ones at `worker_rate` as are missing.
//
// Left out: echo's own CPU cost on the trainer (augmenting each copy), a worker's start-up
// time, and workers whose rate changes with their number (a shared link): the rates are
// as measured, and the decider re-decides when they change.
// Thread-safety: plain functions; an EchoOrScaleDecider is for one caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataecho/core/clock.h"

namespace dataecho {

// A point of the value curve: v(factor) = consumed.
struct EchoValuePoint {
  double factor = 1;
  double consumed = 1;  // examples consumed to the target at `factor`, relative to e = 1
};

// The default curve: at each factor the least valuable of the project's measurements and
// the literature's (echo_or_scale.cc says where each point comes from).
std::vector<EchoValuePoint> default_echo_value();

// v(e) on a valid curve (the points' factors increasing, above 1; the point (1, 1) is
// implied): linear between points, slope 1 beyond the last.
double echo_value_at(const std::vector<EchoValuePoint>& curve, double factor);

struct EchoOrScaleInputs {
  double demand = 0;                  // D: examples/s the trainer consumes when it never waits
  double local_rate = 0;              // L: fresh examples/s of the trainer's own CPUs
  std::vector<double> worker_rates;   // fresh examples/s of each running worker, as measured
  std::optional<double> worker_rate;  // a worker not in worker_rates (started); default:
                                      // their mean (0 without any)
  double worker_price_per_hour = 0;   // defaults 0 and 1: minimise time
  double trainer_price_per_hour = 1;
  int64_t max_workers = 8;
  double max_factor = 4;  // as adaptive echo's default
  std::vector<EchoValuePoint> echo_value = default_echo_value();
};

enum class EchoOrScaleRegime {
  kStepBound,   // the trainer consumes at its demand: C = D
  kInputBound,  // it waits for input: C = e*F < D
};
const char* echo_or_scale_regime_name(EchoOrScaleRegime r);  // "step-bound", "input-bound"

// A choice and what the model predicts for it. Per example: for one of the N1 examples
// the trainer consumes to the target without echo (multiply by N1 for the whole run).
struct EchoOrScaleChoice {
  int64_t workers = 0;
  double factor = 1;
  double fresh_rate = 0;     // F(n), examples/s
  double consumed_rate = 0;  // C(n, e), examples/s
  double seconds_per_example = 0;
  double cost_per_example = 0;  // in the prices' unit
  // T(n, e) / T(0, 1); none when the local rate is 0 (no workers and no echo never get there).
  std::optional<double> relative_time;
  EchoOrScaleRegime regime = EchoOrScaleRegime::kStepBound;
  std::string reason;  // one line
};

// The best choice. Bad inputs are an Error (kInvalidArgument) naming the field: a rate or
// price negative or not finite, a demand not positive, both prices 0, max_workers out of
// [0, 1000000], max_factor < 1, a curve point's factor not above 1 or not increasing, its
// value below the previous one's or above its factor; and inputs with which nothing
// reaches the target (a local rate of 0 and no worker that can add a rate).
EchoOrScaleChoice echo_or_scale(const EchoOrScaleInputs& in);

// The prediction for a given choice (a choice outside the limits is predicted all the
// same); the inputs are checked as echo_or_scale() checks them.
EchoOrScaleChoice predict_echo_or_scale(const EchoOrScaleInputs& in, int64_t workers,
                                        double factor);

struct EchoOrScaleDeciderOptions {
  // A switch only to a choice whose predicted cost is at least this share below the
  // current choice's, both predicted on the same (latest) inputs (its time, where the two
  // cost the same: the trainer free and no workers).
  double min_gain = 0.10;
  // At most one switch per this many seconds, counted from the last switch (the first
  // decision counts as one).
  double min_interval_s = 60;
  std::shared_ptr<const Clock> clock;  // null: the real clock
};

struct EchoOrScaleDecision {
  EchoOrScaleChoice choice;  // what to run: the current choice, predicted on these inputs
  EchoOrScaleChoice best;    // echo_or_scale() on these inputs
  bool switched = false;     // choice is new (the first decision included)
  std::string reason;        // why it switched or kept, one line
};

// Hysteresis over echo_or_scale(): the first decision takes the best choice; later ones
// switch to the best only when it is at least min_gain cheaper than the current one and
// min_interval_s have passed since the last switch. A current choice the inputs' limits no
// longer allow, or with which nothing reaches the target, is replaced at once.
class EchoOrScaleDecider {
 public:
  explicit EchoOrScaleDecider(EchoOrScaleDeciderOptions options = {});

  // Decides on the rates as measured now. Bad inputs or options: an Error, state unchanged.
  EchoOrScaleDecision decide(const EchoOrScaleInputs& in);

  const std::optional<EchoOrScaleChoice>& current() const { return current_; }

 private:
  EchoOrScaleDecision keep_or_switch(const EchoOrScaleInputs& in, EchoOrScaleChoice best,
                                     int64_t now);

  const EchoOrScaleDeciderOptions options_;
  const std::shared_ptr<const Clock> clock_;
  std::optional<EchoOrScaleChoice> current_;
  int64_t switched_ns_ = 0;
};

}  // namespace dataecho
