// The echo-or-scale model (core/echo_or_scale.h) on made-up rates: each test states the
// rates, prices and limits, and the choice a hand computation gives, so that a model that
// always echoes, always scales or ignores a limit fails at least one of them. Then the
// decider's hysteresis on a ManualClock. Per example: seconds and cost for one of the N1
// examples the trainer consumes to the target without echo.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/clock.h"
#include "dataecho/core/echo_or_scale.h"
#include "dataecho/core/error.h"

namespace dataecho {
namespace {

// The default curve's points as echo_or_scale.cc derives them, for the expected values.
const double kV2 = 2 / 1.84;
const double kV3 = 3 / 2.56;
const double kV4 = 4 / 3.29;

EchoOrScaleInputs inputs(double demand, double local_rate, double worker_rate) {
  EchoOrScaleInputs in;
  in.demand = demand;
  in.local_rate = local_rate;
  in.worker_rate = worker_rate;
  return in;
}

// ---------------------------------------------------------------- the curve

TEST(EchoOrScale, TheDefaultCurveIsCautiousAndInterpolatesLinearly) {
  auto curve = default_echo_value();
  EXPECT_DOUBLE_EQ(echo_value_at(curve, 1), 1);
  EXPECT_DOUBLE_EQ(echo_value_at(curve, 2), kV2);
  EXPECT_DOUBLE_EQ(echo_value_at(curve, 4), kV4);
  EXPECT_DOUBLE_EQ(echo_value_at(curve, 2.5), (kV2 + kV3) / 2);
  EXPECT_DOUBLE_EQ(echo_value_at(curve, 1.5), (1 + kV2) / 2);
  // Cautious: at every point at least Muennighoff et al.'s 1/0.98 (e = 2) and 1/0.93 (e = 4).
  EXPECT_GE(echo_value_at(curve, 2), 1 / 0.98);
  EXPECT_GE(echo_value_at(curve, 4), 1 / 0.93);
  // Beyond the last point a repeat is worth nothing: slope 1.
  double last = curve.back().factor;
  EXPECT_DOUBLE_EQ(echo_value_at(curve, last + 2), curve.back().consumed + 2);
  // A curve of the caller's own.
  std::vector<EchoValuePoint> own = {{2, 1.1}, {4, 1.6}};
  EXPECT_DOUBLE_EQ(echo_value_at(own, 3), 1.35);
  EXPECT_DOUBLE_EQ(echo_value_at(own, 5), 2.6);
}

// ---------------------------------------------------------------- the choice

TEST(EchoOrScale, InputBoundWithFreeWorkersAddsWorkersUpToTheDemandAndNoEcho) {
  // D 1,000/s, L 250/s, 100/s a worker, workers free: 8 workers bring F to 1,050 -> 1,000;
  // 7 reach only 950, and echo at R = 1000/950 (v 1.0022) is slower than the 8th worker.
  auto in = inputs(1000, 250, 100);
  in.max_workers = 16;
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 8);
  EXPECT_EQ(c.factor, 1);
  EXPECT_DOUBLE_EQ(c.fresh_rate, 1000);
  EXPECT_DOUBLE_EQ(c.consumed_rate, 1000);
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kStepBound);
  ASSERT_TRUE(c.relative_time);
  EXPECT_DOUBLE_EQ(*c.relative_time, 0.25);  // (1/1000) / (1/250)
  EXPECT_DOUBLE_EQ(c.seconds_per_example, 1.0 / 1000);
  EXPECT_DOUBLE_EQ(c.cost_per_example, 1.0 / 1000 / 3600);  // the trainer's 1 an hour
}

TEST(EchoOrScale, WorkersAreTakenFastestFirstThenStartedOnesAtTheWorkerRate) {
  EchoOrScaleInputs in;
  in.demand = 1000;
  in.local_rate = 250;
  in.worker_rates = {300, 100, 500};  // running
  in.max_workers = 16;
  // 500 + 300 over L: 1,050 with 2 (the slow one is not needed).
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 2);
  EXPECT_EQ(c.factor, 1);
  // A demand of 1,250: the 3 running bring 250 + 900 = 1,150; two started ones at 50/s
  // bring the rest.
  in.demand = 1250;
  in.worker_rate = 50;
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 5);
  EXPECT_DOUBLE_EQ(c.fresh_rate, 1250);
  // Without worker_rate, a started worker runs at the running ones' mean (300).
  in.worker_rate.reset();
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 4);  // 1,150 + 300 >= 1,250
  EXPECT_DOUBLE_EQ(c.fresh_rate, 1250);
}

TEST(EchoOrScale, DearWorkersBuyEchoUpToMaxFactorOrR) {
  // D 1,000, L 200 (R 5), workers 4 an hour against the trainer's 1: echo 4 costs
  // v(4)/(4 x 200) = 1.52 ms per example; one worker and echo R = 3.33 cost 1.19 ms x 5.
  auto in = inputs(1000, 200, 100);
  in.worker_price_per_hour = 4;
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 0);
  EXPECT_DOUBLE_EQ(c.factor, 4);  // max_factor, below R = 5
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kInputBound);
  EXPECT_NE(c.reason.find("input-bound"), std::string::npos) << c.reason;
  EXPECT_DOUBLE_EQ(c.consumed_rate, 800);
  EXPECT_DOUBLE_EQ(c.seconds_per_example, kV4 / 800);
  ASSERT_TRUE(c.relative_time);
  EXPECT_DOUBLE_EQ(*c.relative_time, kV4 / 4);
  // L 400: R = 2.5 below max_factor; the factor is R, between the curve's points.
  in.local_rate = 400;
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 0);
  EXPECT_DOUBLE_EQ(c.factor, 2.5);
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kStepBound);
  EXPECT_DOUBLE_EQ(c.seconds_per_example, (kV2 + kV3) / 2 / 1000);
  EXPECT_DOUBLE_EQ(*c.relative_time, 0.4 * (kV2 + kV3) / 2);
  // L 277: echo R = 3.61 feeds the demand, though R x 277 comes out a last bit below 1,000.
  in.local_rate = 277;
  c = echo_or_scale(in);
  EXPECT_DOUBLE_EQ(c.factor, 1000.0 / 277);
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kStepBound);
}

TEST(EchoOrScale, EchoThatIsWorthNothingIsNeverChosen) {
  // v(e) = e: every factor up to R gives the same time, so the smaller one wins, also at
  // an R between points, where rounding must not decide: at L 259 (R 3.861) and 337 (R
  // 2.967), v(R) / (R x L) comes out a last bit below 1 / L in doubles.
  for (double local : {200.0, 259.0, 300.0, 337.0}) {
    auto in = inputs(1000, local, 100);
    in.echo_value = {{2, 2}, {4, 4}};
    in.worker_price_per_hour = 4;
    auto c = echo_or_scale(in);
    EXPECT_EQ(c.workers, 0) << local;
    EXPECT_EQ(c.factor, 1) << local;
    EXPECT_EQ(c.regime, EchoOrScaleRegime::kInputBound) << local;
    in.worker_price_per_hour = 0;  // workers free: workers up to the demand, still no echo
    c = echo_or_scale(in);
    EXPECT_EQ(c.factor, 1) << local;
    EXPECT_DOUBLE_EQ(c.fresh_rate, 1000) << local;
  }
}

TEST(EchoOrScale, StepBoundAddsNothing) {
  // L >= D: nothing to gain, even with free workers and echo as good as fresh data.
  auto in = inputs(1000, 1200, 100);
  in.echo_value = {{2, 1}, {4, 1}};
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 0);
  EXPECT_EQ(c.factor, 1);
  EXPECT_DOUBLE_EQ(c.fresh_rate, 1000);  // the trainer takes no more than D
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kStepBound);
  EXPECT_DOUBLE_EQ(*c.relative_time, 1);
  EXPECT_NE(c.reason.find("step-bound"), std::string::npos) << c.reason;
}

TEST(EchoOrScale, MaxWorkersAndMaxFactorAreRespected) {
  // A demand far out of reach, workers free, echo nearly free: only the limits stop them.
  auto in = inputs(10000, 100, 100);
  in.max_workers = 3;
  in.max_factor = 2.5;
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 3);
  EXPECT_DOUBLE_EQ(c.factor, 2.5);
  EXPECT_DOUBLE_EQ(c.fresh_rate, 400);
  EXPECT_DOUBLE_EQ(c.consumed_rate, 1000);
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kInputBound);
  in.max_workers = 0;
  in.max_factor = 1;
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 0);
  EXPECT_EQ(c.factor, 1);
  EXPECT_DOUBLE_EQ(*c.relative_time, 1);
}

// The worked example of docs/echo.md. Curve v(2) = 1.1, v(4) = 1.6; D 1,200/s, L 300/s,
// 150/s a worker; the trainer 1 an hour, a worker 0.25; max_workers 6, max_factor 4.
// Per n, the best factor (v(e)/C ms per example, times 1 + 0.25 n):
//   n  F     R     best e  v(e)     T ms/example  x price   cost
//   0  300   4     4       1.6      1.3333        1         1.3333
//   1  450   2.67  2.67    1.26667  1.0556        1.25      1.3194  <- best
//   2  600   2     2       1.1      0.9167        1.5       1.3750
//   3  750   1.6   1.6     1.06     0.8833        1.75      1.5458
//   6  1200  1     1       1        0.8333        2.5       2.0833
// For N1 = 1,200,000 examples: the baseline (n 0, e 1) takes 1,200,000 / 300 = 4,000 s;
// the choice 1,200,000 x 1.26667 / 1,200 = 1,266.7 s (0.3167 of it) and costs
// 1,266.7 / 3,600 x 1.25 = 0.43981.
TEST(EchoOrScale, ThePredictionMatchesTheWorkedExample) {
  auto in = inputs(1200, 300, 150);
  in.echo_value = {{2, 1.1}, {4, 1.6}};
  in.worker_price_per_hour = 0.25;
  in.max_workers = 6;
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 1);
  EXPECT_DOUBLE_EQ(c.factor, 1200.0 / 450);
  EXPECT_DOUBLE_EQ(c.fresh_rate, 450);
  EXPECT_NEAR(c.consumed_rate, 1200, 1e-9);
  EXPECT_EQ(c.regime, EchoOrScaleRegime::kStepBound);
  const double n1 = 1.2e6;
  EXPECT_NEAR(c.seconds_per_example * n1, 1266.6667, 1e-3);
  EXPECT_NEAR(*c.relative_time, 19.0 / 60, 1e-12);
  EXPECT_NEAR(c.cost_per_example * n1, 0.4398148, 1e-6);
  // The runner-up, predicted alone: echo 4 with no worker, 1 % dearer.
  auto echo_only = predict_echo_or_scale(in, 0, 4);
  EXPECT_NEAR(echo_only.seconds_per_example * n1, 1600, 1e-9);
  EXPECT_EQ(echo_only.regime, EchoOrScaleRegime::kStepBound);
  EXPECT_GT(echo_only.cost_per_example, c.cost_per_example);
  EXPECT_LT(echo_only.cost_per_example, c.cost_per_example * 1.02);
  // A factor above R predicts the time at R and the repeats' cost: 1 worker, e = 4.
  auto beyond = predict_echo_or_scale(in, 1, 4);
  EXPECT_NEAR(beyond.seconds_per_example, 1.6 / 1200, 1e-15);
  // Free workers: 6 of them and no echo; workers as dear as the trainer: echo alone.
  in.worker_price_per_hour = 0;
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 6);
  EXPECT_EQ(c.factor, 1);
  in.worker_price_per_hour = 1;
  c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 0);
  EXPECT_DOUBLE_EQ(c.factor, 4);
  // The reason names the regime, the choice and what each single lever would cost.
  EXPECT_NE(c.reason.find("step-bound"), std::string::npos) << c.reason;  // 4 x 300 = D
  EXPECT_NE(c.reason.find("workers only"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("echo only"), std::string::npos) << c.reason;
}

TEST(EchoOrScale, WithNoLocalRateWorkersAreNeededAndTheRelativeTimeIsNone) {
  auto in = inputs(1000, 0, 250);
  auto c = echo_or_scale(in);
  EXPECT_EQ(c.workers, 4);
  EXPECT_FALSE(c.relative_time);
  in.max_workers = 0;
  try {
    echo_or_scale(in);
    FAIL() << "no choice reaches the target";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("local_rate"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- bad inputs

void expect_refused(const EchoOrScaleInputs& in, const std::string& field) {
  try {
    echo_or_scale(in);
    ADD_FAILURE() << "accepted; expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos)
        << "expected " << field << " in: " << e.what();
  }
}

TEST(EchoOrScale, BadInputsAreRefusedNamingTheField) {
  const auto good = inputs(1000, 200, 100);
  ASSERT_NO_THROW(echo_or_scale(good));
  auto in = good;
  in.demand = 0;
  expect_refused(in, "demand");
  in.demand = NAN;
  expect_refused(in, "demand");
  in = good;
  in.local_rate = -1;
  expect_refused(in, "local_rate");
  in = good;
  in.worker_rates = {100, -5};
  expect_refused(in, "worker_rates[1]");
  in = good;
  in.worker_rate = -1;
  expect_refused(in, "worker_rate");
  in = good;
  in.worker_price_per_hour = -1;
  expect_refused(in, "worker_price_per_hour");
  in = good;
  in.trainer_price_per_hour = INFINITY;
  expect_refused(in, "trainer_price_per_hour");
  in = good;
  in.trainer_price_per_hour = 0;
  expect_refused(in, "trainer_price_per_hour");  // both prices 0: nothing to minimise
  in.worker_price_per_hour = 1;
  EXPECT_NO_THROW(echo_or_scale(in));
  in = good;
  in.max_workers = -1;
  expect_refused(in, "max_workers");
  in = good;
  in.max_factor = 0.5;
  expect_refused(in, "max_factor");
}

TEST(EchoOrScale, BadCurvesAreRefusedNamingThePoint) {
  auto in = inputs(1000, 200, 100);
  in.echo_value = {{2, 1.1}, {3, 1.05}};  // decreasing
  expect_refused(in, "echo_value[1]");
  in.echo_value = {{2, 2.5}};  // a repeat worth less than nothing
  expect_refused(in, "echo_value[0]");
  in.echo_value = {{2, 0.9}};  // below v(1) = 1
  expect_refused(in, "echo_value[0]");
  in.echo_value = {{3, 1.1}, {2, 1.2}};  // factors not increasing
  expect_refused(in, "echo_value[1]");
  in.echo_value = {{2, 1.1}, {2, 1.2}};
  expect_refused(in, "echo_value[1]");
  in.echo_value = {{0.5, 1}};
  expect_refused(in, "echo_value[0]");
  in.echo_value = {{1, 1.2}};  // v(1) is 1 by definition
  expect_refused(in, "echo_value[0]");
  in.echo_value = {{2, NAN}};
  expect_refused(in, "echo_value[0]");
  in.echo_value = {{1, 1}, {2, 2}};  // (1, 1) may be given; v(e) = e is allowed
  EXPECT_NO_THROW(echo_or_scale(in));
  in.echo_value = {};  // no points: echo is worth nothing
  EXPECT_EQ(echo_or_scale(in).factor, 1);
}

TEST(EchoOrScale, PredictingABadChoiceIsRefused) {
  auto in = inputs(1000, 200, 100);
  EXPECT_THROW(predict_echo_or_scale(in, -1, 1), Error);
  EXPECT_THROW(predict_echo_or_scale(in, 0, 0.5), Error);
  in.demand = -1;
  EXPECT_THROW(predict_echo_or_scale(in, 0, 1), Error);
}

// ---------------------------------------------------------------- the decider

// D 1,000, 100/s a worker, workers free, no echo (max_factor 1): the best choice is the
// workers that bring L up to the demand, and a choice's cost is 1/F.
EchoOrScaleInputs local(double local_rate, int64_t max_workers = 8) {
  auto in = inputs(1000, local_rate, 100);
  in.max_factor = 1;
  in.max_workers = max_workers;
  return in;
}

struct DeciderFixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  EchoOrScaleDecider decider;
  DeciderFixture() : decider(options()) {}
  EchoOrScaleDeciderOptions options() const {
    EchoOrScaleDeciderOptions o;
    o.clock = clock;
    return o;  // min_gain 10%, min_interval_s 60
  }
};

TEST(EchoOrScaleDecider, TheFirstDecisionTakesTheBest) {
  DeciderFixture f;
  EXPECT_FALSE(f.decider.current());
  auto d = f.decider.decide(local(800));
  EXPECT_TRUE(d.switched);
  EXPECT_EQ(d.choice.workers, 2);
  EXPECT_EQ(d.best.workers, 2);
  ASSERT_TRUE(f.decider.current());
  EXPECT_EQ(f.decider.current()->workers, 2);
}

TEST(EchoOrScaleDecider, AFivePercentBetterChoiceDoesNotSwitch) {
  DeciderFixture f;
  EXPECT_EQ(f.decider.decide(local(1000)).choice.workers, 0);  // step-bound
  f.clock->advance_seconds(600);                               // long past the interval
  // L falls to 950: one worker would cost 1/1000 against the current 1/950, 5% less.
  auto d = f.decider.decide(local(950));
  EXPECT_FALSE(d.switched);
  EXPECT_EQ(d.best.workers, 1);
  EXPECT_EQ(d.choice.workers, 0);
  EXPECT_DOUBLE_EQ(d.choice.fresh_rate, 950);  // the current choice, predicted on the new rates
  EXPECT_EQ(d.choice.regime, EchoOrScaleRegime::kInputBound);
  EXPECT_NE(d.reason.find("5.0%"), std::string::npos) << d.reason;
  EXPECT_EQ(f.decider.current()->workers, 0);
}

TEST(EchoOrScaleDecider, ATwentyPercentBetterChoiceSwitchesOnlyAfterTheInterval) {
  DeciderFixture f;
  EXPECT_EQ(f.decider.decide(local(1000)).choice.workers, 0);  // t = 0: the first switch
  // L falls to 800: two workers cost 20% less.
  f.clock->advance_seconds(30);
  auto d = f.decider.decide(local(800));
  EXPECT_FALSE(d.switched);
  EXPECT_EQ(d.best.workers, 2);
  EXPECT_EQ(d.choice.workers, 0);
  EXPECT_NE(d.reason.find("30"), std::string::npos) << d.reason;  // seconds to wait
  f.clock->advance_seconds(29);                                   // t = 59
  EXPECT_FALSE(f.decider.decide(local(800)).switched);
  f.clock->advance_seconds(1);  // t = 60
  d = f.decider.decide(local(800));
  EXPECT_TRUE(d.switched);
  EXPECT_EQ(d.choice.workers, 2);
  EXPECT_EQ(f.decider.current()->workers, 2);
  // The interval counts from that switch: L 600 makes 4 workers 20% cheaper than 2.
  f.clock->advance_seconds(1);
  d = f.decider.decide(local(600));
  EXPECT_FALSE(d.switched);
  EXPECT_EQ(d.best.workers, 4);
  f.clock->advance_seconds(59);  // t = 120
  d = f.decider.decide(local(600));
  EXPECT_TRUE(d.switched);
  EXPECT_EQ(d.choice.workers, 4);
}

TEST(EchoOrScaleDecider, AChoiceTheLimitsNoLongerAllowIsReplacedAtOnce) {
  DeciderFixture f;
  EXPECT_EQ(f.decider.decide(local(600)).choice.workers, 4);
  f.clock->advance_seconds(1);
  auto d = f.decider.decide(local(600, /*max_workers=*/2));
  EXPECT_TRUE(d.switched);
  EXPECT_EQ(d.choice.workers, 2);
  // Echo capped the same way: the current factor above a new max_factor goes at once.
  DeciderFixture g;
  auto in = inputs(1000, 200, 100);
  in.max_workers = 0;
  EXPECT_DOUBLE_EQ(g.decider.decide(in).choice.factor, 4);
  g.clock->advance_seconds(1);
  in.max_factor = 3;
  d = g.decider.decide(in);
  EXPECT_TRUE(d.switched);
  EXPECT_DOUBLE_EQ(d.choice.factor, 3);
}

TEST(EchoOrScaleDecider, AChoiceThatNoLongerReachesTheTargetIsReplacedAtOnce) {
  DeciderFixture f;
  EXPECT_EQ(f.decider.decide(local(1000)).choice.workers, 0);
  f.clock->advance_seconds(1);
  auto d = f.decider.decide(local(0));  // the local pipeline stopped
  EXPECT_TRUE(d.switched);
  EXPECT_EQ(d.choice.workers, 8);  // max_workers
}

TEST(EchoOrScaleDecider, WhereChoicesCostTheSameTheGainIsInTime) {
  // The trainer free, workers priced: every choice without workers costs 0, and echo
  // alone is chosen by time. L 500 -> 250 makes echo 4 42% sooner than the current 2.
  DeciderFixture f;
  auto in = inputs(1000, 500, 100);
  in.trainer_price_per_hour = 0;
  in.worker_price_per_hour = 1;
  EXPECT_DOUBLE_EQ(f.decider.decide(in).choice.factor, 2);
  f.clock->advance_seconds(60);
  in.local_rate = 250;
  auto d = f.decider.decide(in);
  EXPECT_TRUE(d.switched) << d.reason;
  EXPECT_EQ(d.choice.workers, 0);
  EXPECT_DOUBLE_EQ(d.choice.factor, 4);
  EXPECT_EQ(d.choice.cost_per_example, 0);
}

TEST(EchoOrScaleDecider, BadOptionsAreRefusedNamingTheField) {
  EchoOrScaleDeciderOptions o;
  o.min_gain = 1;
  try {
    EchoOrScaleDecider d(o);
    FAIL() << "min_gain 1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_gain"), std::string::npos) << e.what();
  }
  o.min_gain = 0.1;
  o.min_interval_s = -1;
  try {
    EchoOrScaleDecider d(o);
    FAIL() << "min_interval_s -1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_interval_s"), std::string::npos) << e.what();
  }
  // Bad inputs leave the decider as it was.
  DeciderFixture f;
  f.decider.decide(local(800));
  auto bad = local(800);
  bad.demand = -1;
  EXPECT_THROW(f.decider.decide(bad), Error);
  EXPECT_EQ(f.decider.current()->workers, 2);
}

}  // namespace
}  // namespace dataecho
