// The tuner's rules (core/tuner.h) on made-up windows, without a clock: each test builds a
// TunerPolicy over knobs of its own, feeds it TunerWindows (the measurements the Tuner
// takes from its nodes' counters) and checks the exact decision, as tf.data tests its
// autotuning model on made-up timings. The last tests drive a whole Tuner with a
// ManualClock and counters set by hand, and a small simulated stage; then what a tuner
// remembers for the next (TunerMemo, TunerMemory, a Tuner resumed on a ManualClock).
// Options everywhere unless said: windows of 1 s (0.25 s in the warm-up), a warm-up of
// 10 s, a change interval of 30 s, min_gain 5%, 8 cores, a CPU budget of all 8, 1 GiB of
// RAM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dataecho/core/clock.h"
#include "dataecho/core/dataset.h"
#include "dataecho/core/error.h"
#include "dataecho/core/tuner.h"
#include "dataecho/spec/pipeline_def.h"

namespace dataecho {
namespace {

using Rule = TunerChange::Rule;
using Verdict = TunerPolicy::Verdict;

constexpr int kCores = 8;
constexpr double kMiB = 1048576.0;

TunerOptions options(double cpu_budget = kCores, double ram_mb = 1024) {
  TunerOptions o;
  o.cpu_budget = cpu_budget;
  o.ram_budget_bytes = static_cast<int64_t>(ram_mb * kMiB);
  return o;  // the other fields at their defaults: 1 s, 10 s, 30 s, 0.05, 64
}

// A map's parallelism: it buffers parallelism + 16 elements.
std::shared_ptr<Knob> map_knob(int64_t initial, int64_t max = 64) {
  return std::make_shared<Knob>(Knob::Kind::kParallelism, "parallelism", initial, 1, max,
                                [](int64_t v) { return v + 16; });
}
// A prefetch buffer: it buffers its value.
std::shared_ptr<Knob> buffer_knob(int64_t initial, int64_t max = 4096, int64_t max_bytes = 0) {
  return std::make_shared<Knob>(
      Knob::Kind::kBuffer, "buffer", initial, 1, max, [](int64_t v) { return v; }, max_bytes);
}
// An echo's cap: it buffers 2 x 1,024 + 1 elements whatever the cap, at most 32 MiB.
std::shared_ptr<Knob> echo_knob(int64_t max = 4) {
  return std::make_shared<Knob>(
      Knob::Kind::kEcho, "max_copies", 1, 1, max, [](int64_t) { return 2049; }, int64_t{32} << 20);
}

KnobWindow busy(double share, int64_t elements, double cpu_per_thread = 0.01) {
  KnobWindow k;
  k.busy_share = share;
  k.cpu_per_thread = cpu_per_thread;
  k.elements = elements;
  return k;
}
KnobWindow waited(double wait_share, int64_t elements, double bytes_per_element = 0) {
  KnobWindow k;
  k.wait_share = wait_share;
  k.elements = elements;
  k.bytes_per_element = bytes_per_element;
  return k;
}
KnobWindow repeating(double repeat_share, int64_t elements) {
  KnobWindow k;
  k.repeat_share = repeat_share;
  k.elements = elements;
  return k;
}

TunerWindow window(double t_s, double consumer_wait, double cores, std::vector<KnobWindow> knobs) {
  return TunerWindow{t_s, consumer_wait, cores, std::move(knobs)};
}

// ---------------------------------------------------------------- the change interval

TEST(TunerRules, DuringTheWarmUpAChangeMayComeEveryWindowWokenUpToHalfAWindowEarly) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(1);
  p.add(m, 0, 0);
  EXPECT_TRUE(p.may_change(0.25));  // nothing changed yet
  // A raise at 1.0 s (busy 95%, warm-up: doubles).
  auto out = p.step(window(1.0, 0.5, 1, {busy(0.95, 100)}));
  ASSERT_TRUE(out.change);
  EXPECT_EQ(out.change->from, 1);
  EXPECT_EQ(out.change->to, 2);
  // Windows of 0.25 s: the next change from 1.125 s on (a quarter window less half).
  EXPECT_FALSE(p.may_change(1.1));
  EXPECT_TRUE(p.may_change(1.125));
  EXPECT_TRUE(p.may_change(1.25));
  // A window that ends too early changes nothing, not even the trial's verdict.
  EXPECT_FALSE(p.step(window(1.1, 0.5, 1, {busy(0.95, 1000)})).change);
  EXPECT_EQ(p.trial(), 0u);
}

TEST(TunerRules, AfterTheWarmUpChangesAreAFullIntervalApart) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(1);
  p.add(m, 0, 0);
  ASSERT_TRUE(p.step(window(20, 0.5, 1, {busy(0.95, 1000)})).change);  // 1 -> 2, one step
  EXPECT_EQ(m->value(), 2);
  EXPECT_FALSE(p.may_change(21));
  EXPECT_FALSE(p.may_change(49.99));
  EXPECT_TRUE(p.may_change(50));
  // A raise late in the warm-up: the first change after it waits the full interval.
  TunerPolicy q(options(), kCores);
  q.add(map_knob(1), 0, 0);
  ASSERT_TRUE(q.step(window(9.5, 0.5, 1, {busy(0.95, 1000)})).change);
  EXPECT_FALSE(q.may_change(10.5));
  EXPECT_FALSE(q.may_change(39.49));
  EXPECT_TRUE(q.may_change(39.5));
}

// ---------------------------------------------------------------- 1. over a budget

TEST(TunerRules, OverTheCpuBudgetTheCostliestMapLosesAThread) {
  TunerPolicy p(options(/*cpu_budget=*/2), kCores);
  auto a = map_knob(4), b = map_knob(2), c = map_knob(1);
  p.add(a, 0, 0), p.add(b, 0, 0), p.add(c, 0, 0);
  // a costs 4 x 0.2 = 0.8 cores, b 2 x 0.5 = 1.0, c (at its minimum) 1 x 2.0.
  auto w = window(20, 0.5, 2.3, {busy(1, 100, 0.2), busy(1, 100, 0.5), busy(1, 100, 2.0)});
  auto c1 = p.over_budget(w);
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->knob, 1u);
  EXPECT_EQ(c1->to, 1);
  EXPECT_EQ(c1->rule, Rule::kCpuBudget);
  EXPECT_EQ(c1->reason, "over the CPU budget: 2.30 cores used, budget 2.00");
  auto out = p.step(w);
  ASSERT_TRUE(out.change);
  EXPECT_EQ(b->value(), 1);
  EXPECT_EQ(a->value(), 4);
  // The threshold: 10% over the budget and 0.05 cores.
  TunerPolicy q(options(2), kCores);
  q.add(map_knob(4), 0, 0);
  EXPECT_FALSE(q.over_budget(window(20, 0.5, 2.25, {busy(1, 100, 0.5)})));
  EXPECT_TRUE(q.over_budget(window(20, 0.5, 2.26, {busy(1, 100, 0.5)})));
}

TEST(TunerRules, WithTheBudgetAtAllCoresTheCpuIsNeverOver) {
  TunerPolicy p(options(/*cpu_budget=*/kCores), kCores);
  p.add(map_knob(8), 0, 0);
  EXPECT_FALSE(p.over_budget(window(20, 0.5, 12, {busy(1, 100, 1.5)})));
}

TEST(TunerRules, OverTheCpuBudgetTheRaiseOnTrialIsTakenBackFirst) {
  TunerPolicy p(options(/*cpu_budget=*/2), kCores);
  auto a = map_knob(1), b = map_knob(6);
  p.add(a, 0, 0), p.add(b, 0, 0);
  // a raised 1 -> 2 (busy 95% in the warm-up; 0.1 cores a thread fits).
  ASSERT_TRUE(p.step(window(1, 0.5, 1.5, {busy(0.95, 100, 0.1), busy(0.2, 100, 0.1)})).change);
  ASSERT_EQ(a->value(), 2);
  ASSERT_EQ(p.trial(), 0u);
  // Over the budget: a goes back to 1, though b costs more.
  auto out = p.step(window(1.25, 0.5, 2.5, {busy(1, 150, 0.1), busy(1, 150, 0.3)}));
  ASSERT_TRUE(out.change);
  EXPECT_EQ(out.change->knob, 0u);
  EXPECT_EQ(out.change->to, 1);
  EXPECT_EQ(out.change->rule, Rule::kCpuBudget);
  EXPECT_FALSE(p.trial());
  EXPECT_EQ(b->value(), 6);
}

TEST(TunerRules, OverTheRamBudgetTheFirstBufferHalves) {
  // Elements of 1 MiB, a prefetch of 8, a budget of 6 MiB: 8 -> 4, then within it.
  TunerPolicy p(options(kCores, /*ram_mb=*/6), kCores);
  auto b = buffer_knob(8);
  p.add(b, 0, 0);
  auto out = p.step(window(1, 0, 1, {waited(0, 100, kMiB)}));
  ASSERT_TRUE(out.change);
  EXPECT_EQ(out.change->rule, Rule::kRamBudget);
  EXPECT_EQ(out.change->reason, "over the RAM budget");
  EXPECT_EQ(b->value(), 4);
  EXPECT_FALSE(p.step(window(1.25, 0, 1, {waited(0, 200, kMiB)})).change);
  EXPECT_EQ(b->value(), 4);
  // Elements grow to 2 MiB: 4 -> 2.
  ASSERT_TRUE(p.step(window(1.5, 0, 1, {waited(0, 300, 2 * kMiB)})).change);
  EXPECT_EQ(b->value(), 2);
}

TEST(TunerRules, ABufferBoundInBytesCountsAtItsBytes) {
  // 1,024 elements of 1 MiB but at most 2 MiB held: 2 MiB, within a budget of 6 MiB.
  TunerPolicy p(options(kCores, 6), kCores);
  p.add(buffer_knob(1024, 4096, int64_t{2} << 20), 0, 0);
  EXPECT_FALSE(p.over_budget(window(1, 0, 1, {waited(0, 100, kMiB)})));
  TunerPolicy q(options(kCores, 6), kCores);
  q.add(buffer_knob(1024), 0, 0);
  EXPECT_TRUE(q.over_budget(window(1, 0, 1, {waited(0, 100, kMiB)})));
}

// ---------------------------------------------------------------- 2. the trial

// A map raised 1 -> 2 at t = 20 s after 1,000 elements (50/s over 20 s); `p` is past
// the warm-up.
struct Trial {
  TunerPolicy p{options(), kCores};
  std::shared_ptr<Knob> m = map_knob(1);
  Trial() {
    p.add(m, 0, 0);
    auto out = p.step(window(20, 0.5, 1, {busy(0.95, 1000)}));
    EXPECT_TRUE(out.change);
    EXPECT_EQ(m->value(), 2);
  }
};

TEST(TunerRules, ARaiseIsKeptWhenTheNodesRateRoseByMinGain) {
  Trial t;
  // 30 s later: 1,575 more elements, 52.5/s: exactly 5% above 50.
  auto w = window(50, 0, 1, {busy(0.6, 1000 + 1575)});
  EXPECT_EQ(t.p.judge_trial(w, nullptr), Verdict::kKeep);
  auto out = t.p.step(w);
  EXPECT_EQ(out.kept, 0u);
  EXPECT_FALSE(out.change);  // and the consumer no longer waits: nothing more
  EXPECT_FALSE(t.p.trial());
  EXPECT_EQ(t.m->value(), 2);
}

TEST(TunerRules, ARaiseWithoutGainIsTakenBackAndTheKnobLeftAloneForFourIntervals) {
  Trial t;
  auto w = window(50, 0.5, 1, {busy(1, 1000 + 1574)});  // 52.47/s: under 5%
  TunerChange back;
  EXPECT_EQ(t.p.judge_trial(w, &back), Verdict::kTakeBack);
  EXPECT_EQ(back.reason, "taken back: 50 -> 52 elements/s");
  auto out = t.p.step(w);
  ASSERT_TRUE(out.change);
  EXPECT_EQ(out.change->rule, Rule::kTakeBack);
  EXPECT_EQ(out.change->from, 2);
  EXPECT_EQ(out.change->to, 1);
  EXPECT_DOUBLE_EQ(t.p.blocked_until(0), 50 + 4 * 30);
  // Busy and waited on, but left alone until 170 s; then raised again.
  EXPECT_FALSE(t.p.step(window(80, 0.5, 1, {busy(1, 4000)})).change);
  EXPECT_FALSE(t.p.step(window(169, 0.5, 1, {busy(1, 8000)})).change);
  auto again = t.p.step(window(170, 0.5, 1, {busy(1, 8100)}));
  ASSERT_TRUE(again.change);
  EXPECT_EQ(again.change->rule, Rule::kRaise);
  EXPECT_EQ(t.m->value(), 2);
}

TEST(TunerRules, ATrialWaitsForTwentyElementsOrEightIntervals) {
  Trial t;
  // 19 elements in 30 s: too few to judge; nothing else moves meanwhile.
  auto w = window(50, 0.5, 1, {busy(1, 1019)});
  EXPECT_EQ(t.p.judge_trial(w, nullptr), Verdict::kWait);
  EXPECT_FALSE(t.p.step(w).change);
  EXPECT_EQ(t.p.trial(), 0u);
  // 20 elements: judged (and taken back: 0.67/s).
  EXPECT_EQ(t.p.judge_trial(window(50, 0.5, 1, {busy(1, 1020)}), nullptr), Verdict::kTakeBack);
  // 8 intervals (240 s) after the raise: judged on what there is.
  EXPECT_EQ(t.p.judge_trial(window(259.9, 0.5, 1, {busy(1, 1019)}), nullptr), Verdict::kWait);
  EXPECT_EQ(t.p.judge_trial(window(260, 0.5, 1, {busy(1, 1019)}), nullptr), Verdict::kTakeBack);
}

// ---------------------------------------------------------------- 3. keeping up

TEST(TunerRules, APipelineWhoseConsumerWaitsUnderFivePercentIsLeftAlone) {
  TunerPolicy p(options(), kCores);
  p.add(map_knob(1), 0, 0);
  p.add(echo_knob(), 0, 0);
  EXPECT_TRUE(p.keeps_up(window(20, 0.049, 1, {busy(1, 100), repeating(0.049, 100)})));
  EXPECT_FALSE(p.keeps_up(window(20, 0.05, 1, {busy(1, 100), repeating(0, 100)})));
  // An echo that repeats 5% of its rows fills a gap: the pipeline does not keep up.
  EXPECT_FALSE(p.keeps_up(window(20, 0, 1, {busy(1, 100), repeating(0.05, 100)})));
  // A busy map alone is no reason to raise.
  EXPECT_FALSE(p.step(window(20, 0.049, 1, {busy(1, 100), repeating(0, 100)})).change);
  // Only an echo's repeats count: a map's repeat_share (never set) is ignored.
  TunerPolicy q(options(), kCores);
  q.add(map_knob(1), 0, 0);
  EXPECT_TRUE(q.keeps_up(window(20, 0, 1, {repeating(0.5, 100)})));
}

// ---------------------------------------------------------------- 4. the bottleneck

TEST(TunerRules, TheBusiestMapRisesByOneOrDoublesInTheWarmUp) {
  TunerPolicy p(options(), kCores);
  auto a = map_knob(3), b = map_knob(3);
  p.add(a, 0, 0), p.add(b, 0, 0);
  auto w = window(20, 0.3, 1, {busy(0.7, 100), busy(0.8, 100)});
  auto c = p.raise_bottleneck(w);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->knob, 1u);
  EXPECT_EQ(c->to, 4);
  EXPECT_EQ(c->reason,
            "consumer waits 30% of the time; node busy 80%, 1.00 cores used, budget 8.00");
  // In the warm-up, 90% busy doubles; 89% adds one.
  EXPECT_EQ(p.raise_bottleneck(window(5, 0.3, 1, {busy(0.9, 100), busy(0, 100)}))->to, 6);
  EXPECT_EQ(p.raise_bottleneck(window(5, 0.3, 1, {busy(0.89, 100), busy(0, 100)}))->to, 4);
  // Under half busy: its workers wait for input or room; not a bottleneck.
  EXPECT_FALSE(p.raise_bottleneck(window(20, 0.3, 1, {busy(0.49, 100), busy(0.3, 100)})));
}

TEST(TunerRules, ABusyMapComesBeforeAWaitedOnBuffer) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(2), b = buffer_knob(2);
  p.add(m, 0, 0), p.add(b, 0, 0);
  auto c = p.raise_bottleneck(window(20, 0.3, 1, {busy(0.5, 100), waited(0.9, 100)}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->knob, 0u);
  // With the map idle, the buffer doubles; under 5% waited on, it does not.
  c = p.raise_bottleneck(window(20, 0.3, 1, {busy(0.4, 100), waited(0.05, 100)}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->knob, 1u);
  EXPECT_EQ(c->to, 4);
  EXPECT_FALSE(p.raise_bottleneck(window(20, 0.3, 1, {busy(0.4, 100), waited(0.049, 100)})));
}

TEST(TunerRules, RaisesStopAtTheKnobsLimits) {
  TunerOptions o = options();
  o.max_parallelism = 5;
  TunerPolicy p(o, kCores);
  auto a = map_knob(4, /*max=*/64), full = buffer_knob(4096);
  p.add(a, 0, 0), p.add(full, 0, 0);
  // Doubling a (4 -> 8) stops at max_parallelism 5.
  auto w = window(5, 0.3, 1, {busy(0.95, 100), waited(1, 100)});
  EXPECT_EQ(p.raise_bottleneck(w)->to, 5);
  // A map at max_parallelism does not rise, nor a buffer at its max.
  a->set(5);
  EXPECT_FALSE(p.raise_bottleneck(w));
  // Doubling b (6 -> 12) stops at its max of 7.
  TunerPolicy q(options(), kCores);
  auto b = map_knob(6, /*max=*/7);
  q.add(b, 0, 0);
  EXPECT_EQ(q.raise_bottleneck(window(5, 0.3, 1, {busy(0.95, 100)}))->to, 7);
}

TEST(TunerRules, ThreadsAreAddedOnlyWhereTheirCpuFits) {
  // Budget at all 8 cores: the limit is the machine's cores plus half a core.
  TunerPolicy p(options(), kCores);
  auto m = map_knob(2);
  p.add(m, 0, 0);
  EXPECT_EQ(p.raise_bottleneck(window(20, 0.3, 7.9, {busy(1, 100, 0.5)}))->to, 3);  // 8.4
  EXPECT_FALSE(p.raise_bottleneck(window(20, 0.3, 8.1, {busy(1, 100, 0.5)})));      // 8.6
  // Doubling in the warm-up is cut to what fits: 2 -> 4 would be 8.6 cores, 3 is 8.1.
  EXPECT_EQ(p.raise_bottleneck(window(5, 0.3, 7.6, {busy(1, 100, 0.5)}))->to, 3);
  // A stage that sleeps (0.01 cores a thread) gets threads beyond the cores.
  auto many = map_knob(16);
  TunerPolicy q(options(), kCores);
  q.add(many, 0, 0);
  EXPECT_EQ(q.raise_bottleneck(window(5, 0.3, 2, {busy(1, 100, 0.01)}))->to, 32);
  // On a budget of 2 cores: the limit is the budget plus 0.05.
  TunerPolicy r(options(/*cpu_budget=*/2), kCores);
  r.add(map_knob(1), 0, 0);
  EXPECT_EQ(r.raise_bottleneck(window(20, 0.3, 1.5, {busy(1, 100, 0.5)}))->to, 2);  // 2.0
  EXPECT_FALSE(r.raise_bottleneck(window(20, 0.3, 1.5, {busy(1, 100, 0.6)})));      // 2.1
}

TEST(TunerRules, ARaiseThatWouldPassTheRamBudgetIsNotMade) {
  // A prefetch of 4 elements of 1 MiB on a budget of 6 MiB: 8 would pass it.
  TunerPolicy p(options(kCores, 6), kCores);
  auto b = buffer_knob(4);
  p.add(b, 0, 0);
  EXPECT_FALSE(p.raise_bottleneck(window(20, 0.5, 1, {waited(0.5, 100, kMiB)})));
  EXPECT_TRUE(p.raise_bottleneck(window(20, 0.5, 1, {waited(0.5, 100, 0.5 * kMiB)})));
}

TEST(TunerRules, AKnobIsRaisedOnlyOnceItsRateIsMeasuredOnTwentyElements) {
  TunerPolicy p(options(), kCores);
  auto a = map_knob(1), b = map_knob(1);
  p.add(a, 0, 0), p.add(b, 0, 0);
  // a raised at 20 s (kept at 50 s below); b ran only 19 elements since.
  ASSERT_TRUE(p.step(window(20, 0.5, 1, {busy(1, 1000), busy(0.2, 1000)})).change);
  auto w = window(50, 0.5, 1, {busy(0.6, 4000), busy(1, 1019)});
  EXPECT_EQ(p.judge_trial(w, nullptr), Verdict::kKeep);
  auto out = p.step(w);
  EXPECT_EQ(out.kept, 0u);
  // b was skipped; a (busy 60%, measured) was raised instead.
  ASSERT_TRUE(out.change);
  EXPECT_EQ(out.change->knob, 0u);
  EXPECT_EQ(a->value(), 3);
  EXPECT_EQ(b->value(), 1);
}

// ---------------------------------------------------------------- 5. the echo

TEST(TunerRules, AnEchoRisesToItsMaxOnlyWhenNothingElseCan) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(4, /*max=*/4), e = echo_knob(4);
  p.add(m, 0, 0), p.add(e, 0, 0);
  auto w = window(20, 0.3, 1, {busy(1, 1000), repeating(0, 1000)});
  EXPECT_FALSE(p.raise_bottleneck(w));  // the map is at its max
  auto c = p.raise_echo(w);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->rule, Rule::kRaiseEcho);
  EXPECT_EQ(c->to, 4);
  EXPECT_EQ(c->reason,
            "consumer waits 30% of the time and no other setting can rise: echo fills the gap; "
            "1.00 cores used, budget 8.00");
  auto out = p.step(w);
  ASSERT_TRUE(out.change);
  EXPECT_EQ(e->value(), 4);
  EXPECT_EQ(p.trial(), 1u);
}

TEST(TunerRules, AnEchoWaitsWhileAMapThatMayRiseIsUnmeasured) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(2), e = echo_knob(4);
  // The map came 5 s ago and has run 10 elements since: untested.
  p.add(m, 1000, 15), p.add(e, 0, 0);
  auto w = window(20, 0.3, 1, {busy(0.2, 1010), repeating(0, 1000)});
  EXPECT_FALSE(p.raise_bottleneck(w));
  EXPECT_FALSE(p.raise_echo(w));
  // Twenty elements: measured, idle (busy 20%): now the echo may rise.
  EXPECT_TRUE(p.raise_echo(window(20, 0.3, 1, {busy(0.2, 1020), repeating(0, 1000)})));
  // Or eight intervals after it came (during the warm-up: 8 x 0.25 s).
  TunerPolicy q(options(), kCores);
  q.add(map_knob(2), 1000, 1), q.add(echo_knob(4), 0, 0);
  EXPECT_FALSE(q.raise_echo(window(2.99, 0.3, 1, {busy(0.2, 1010), repeating(0, 1000)})));
  EXPECT_TRUE(q.raise_echo(window(3, 0.3, 1, {busy(0.2, 1010), repeating(0, 1000)})));
}

TEST(TunerRules, AnEchoRisesForAWaitingConsumerNotForRepeatsAlready) {
  TunerPolicy p(options(), kCores);
  auto m = map_knob(2), e = echo_knob(4);
  p.add(m, 0, 0), p.add(e, 0, 0);
  // Repeats fill 40% but the consumer waits 1%: the busy map rises, with that reason.
  auto w = window(20, 0.01, 1, {busy(0.9, 1000), repeating(0.4, 1000)});
  EXPECT_FALSE(p.keeps_up(w));
  EXPECT_FALSE(p.raise_echo(window(20, 0.01, 1, {busy(0.1, 1000), repeating(0.4, 1000)})));
  auto c = p.raise_bottleneck(w);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->reason,
            "an echo repeats 40% of the rows (consumer waits 1%); node busy 90%, 1.00 cores used, "
            "budget 8.00");
}

// ---------------------------------------------------------------- the rules together

// A simulated stage: each thread makes 50 elements/s (20 ms each, sleeping: 0.01 cores)
// out of an input that gives at most `input` elements/s, ahead of a consumer that takes
// `consumer` elements/s. Each window the stage makes min(50 p, input, consumer) elements;
// its threads are busy for that share of their time and the consumer waits for the rest
// of its own.
struct Simulated {
  TunerPolicy p{options(), kCores};
  std::shared_ptr<Knob> m = map_knob(1);
  double consumer, input;
  double t = 0;
  double made = 0;
  std::vector<std::string> log;  // "t: from -> to (taken back)"
  Simulated(double c, double in) : consumer(c), input(in) { p.add(m, 0, 0); }
  void run_until(double end) {
    while (true) {
      const double dt = p.window_at(t);
      if (t + dt > end + 1e-9) return;
      t += dt;
      const double cap = 50.0 * static_cast<double>(m->value());
      const double rate = std::min({cap, input, consumer});
      made += rate * dt;
      auto out =
          p.step(window(t, 1 - rate / consumer, 0.5, {busy(rate / cap, std::llround(made))}));
      if (out.change) {
        log.push_back(std::to_string(t).substr(0, 5) + ": " + std::to_string(out.change->from) +
                      " -> " + std::to_string(out.change->to) +
                      (out.change->rule == Rule::kTakeBack ? " (taken back)" : ""));
      }
    }
  }
};

TEST(TunerRules, ASimulatedStageIsDoubledToItsBestInTheWarmUp) {
  Simulated s(400, 1e9);  // best: 8 threads
  s.run_until(10);
  EXPECT_EQ(s.log, (std::vector<std::string>{"0.250: 1 -> 2", "0.500: 2 -> 4", "0.750: 4 -> 8"}));
  EXPECT_EQ(s.m->value(), 8);
}

TEST(TunerRules, ASimulatedRaiseWithoutGainIsTakenBackAfterTheWarmUp) {
  // 8 threads make 400/s; the input gives 405/s at most, the consumer would take 500.
  // The warm-up doubles 8 to 16 (busy 100%), which gains 1%: taken back, and the map left
  // alone for 120 s; then 9 is tried, a change interval later judged, taken back again.
  Simulated s(500, 405);
  s.run_until(200);
  EXPECT_EQ(s.log, (std::vector<std::string>{"0.250: 1 -> 2", "0.500: 2 -> 4", "0.750: 4 -> 8",
                                             "1.000: 8 -> 16", "1.250: 16 -> 8 (taken back)",
                                             "122.0: 8 -> 9", "152.0: 9 -> 8 (taken back)"}));
  EXPECT_EQ(s.m->value(), 8);
  EXPECT_DOUBLE_EQ(s.p.blocked_until(0), 272);
}

// ---------------------------------------------------------------- the Tuner, stepped

// A Tuner on a ManualClock whose output is a prefetch, with one map knob at 1.
struct ClockedTuner {
  static TunerOptions clocked(std::shared_ptr<ManualClock> clock) {
    TunerOptions o = options();
    o.clock = std::move(clock);
    return o;
  }
  ClockedTuner() { tuner.add(m, stats); }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'000'000'000);
  std::shared_ptr<NodeStats> out = std::make_shared<NodeStats>("2:prefetch");
  Tuner tuner{clocked(clock), out};
  std::shared_ptr<Knob> m = map_knob(1);
  std::shared_ptr<NodeStats> stats = std::make_shared<NodeStats>("1:map", true);
};

// A Tuner with a ManualClock: the counters are set by hand, and step() turns them into a
// window: busy 0.25 s of a 0.25 s window with one thread (100%), the consumer waiting
// half the time, 1 core used.
TEST(TunerStepped, MeasuresTheCountersOverTheClocksWindow) {
  ClockedTuner st;
  auto& [clock, out, tuner, m, stats] = st;
  EXPECT_FALSE(tuner.step());  // no time has passed: no window
  clock->advance_seconds(0.25, /*cores=*/1);
  stats->busy_ns += 250'000'000;
  stats->elements += 30;
  out->next_ns += 125'000'000;
  auto c = tuner.step();
  ASSERT_TRUE(c) << tuner.report().dump();
  EXPECT_EQ(c->to, 2);
  EXPECT_EQ(c->reason,
            "consumer waits 50% of the time; node busy 100%, 1.00 cores used, budget 8.00");
  EXPECT_EQ(m->value(), 2);
  const auto report = tuner.report();
  EXPECT_EQ(report["windows"], 1);
  ASSERT_EQ(report["changes"].size(), 1u);
  EXPECT_EQ(report["changes"][0]["t_s"], 0.3);  // 0.25, rounded to 0.1 s
  EXPECT_EQ(report["changes"][0]["node"], "1:map");
  EXPECT_EQ(stats->values().at("parallelism"), 2);
  EXPECT_EQ(stats->counters().at("tuner_changes"), 1);
  // The next window: two threads busy half the time each, 30 more elements (120/s
  // against 30/0.25 = 120/s before: no gain), so the raise is taken back.
  clock->advance_seconds(0.25, 1);
  stats->busy_ns += 250'000'000;
  stats->elements += 30;
  c = tuner.step();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->rule, Rule::kTakeBack);
  EXPECT_EQ(m->value(), 1);
}

// A wait that spans windows counts in each window it spans: the consumer is inside one
// call to next() all through the first window (the old count, at the call's return, saw
// no wait there and 140% in the next), and the call returns 0.1 s into the second.
TEST(TunerStepped, AWaitInProgressCountsInTheWindowsItSpans) {
  ClockedTuner st;
  auto& [clock, out, tuner, m, stats] = st;
  EXPECT_FALSE(tuner.step());
  out->next_since_ns = clock->now_ns();  // the consumer calls next()
  clock->advance_seconds(0.25, 1);
  stats->busy_ns += 250'000'000;
  stats->elements += 30;
  auto c = tuner.step();
  ASSERT_TRUE(c) << tuner.report().dump();
  EXPECT_EQ(c->reason,
            "consumer waits 100% of the time; node busy 100%, 1.00 cores used, budget 8.00");
  EXPECT_EQ(out->next_ns_at(clock->now_ns()), 250'000'000);
  // It returns after 0.35 s: next() clears the stamp and adds the call's time.
  out->next_since_ns = 0;
  out->next_ns += 350'000'000;
  clock->advance_seconds(0.25, 1);
  EXPECT_EQ(out->next_ns_at(clock->now_ns()), 350'000'000);  // 0.1 s of this window
}

// A node whose next() returns one empty element once `go` is set.
class Gate : public Dataset {
 public:
  explicit Gate(std::shared_future<void> go) : go_(std::move(go)) {}
  std::string op_name() const override { return "gate"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    class It : public Iterator {
     public:
      explicit It(std::shared_future<void> go) : go_(std::move(go)) {}
      void save(StateWriter&) override {}
      void restore(StateReader&) override {}

     protected:
      std::optional<Example> next_impl() override {
        go_.wait();
        return Example{};
      }

     private:
      std::shared_future<void> go_;
    };
    return std::make_unique<It>(go_);
  }

 private:
  std::shared_future<void> go_;
};

// Iterator::next() stamps the call while it runs, and clears the stamp as it adds the
// call's time.
TEST(TunerStepped, NextStampsTheCallInProgress) {
  std::promise<void> go;
  auto gate = std::make_shared<Gate>(go.get_future().share());
  auto stats = std::make_shared<NodeStats>("0:gate");
  gate->attach("0:gate", stats);
  auto it = gate->make_iterator(IteratorContext{});
  const int64_t before = now_ns();
  std::thread consumer([&] { it->next(); });
  while (stats->next_since_ns.load() == 0) std::this_thread::yield();
  EXPECT_GE(stats->next_since_ns.load(), before);
  EXPECT_EQ(stats->next_ns.load(), 0);
  const int64_t since = stats->next_since_ns.load(), at = now_ns();
  EXPECT_EQ(stats->next_ns_at(at), at - since);
  go.set_value();
  consumer.join();
  EXPECT_EQ(stats->next_since_ns.load(), 0);
  EXPECT_GE(stats->next_ns.load(), at - since);  // the whole call, once it returned
  EXPECT_EQ(stats->next_ns_at(now_ns()), stats->next_ns.load());
  EXPECT_EQ(stats->elements.load(), 1);
}

// ---------------------------------------------------------------- remembering

TunerMemo sample_memo() {
  TunerMemo m;
  m.elapsed_s = 12.5;
  m.last_change_s = 3.25;
  m.windows = 17;
  m.knobs.push_back({"1:map(decode)", "parallelism", 3, 130.5, false, 0, 0});
  m.knobs.push_back({"3:prefetch", "buffer", 8, -1, true, 4, 17.5});
  return m;
}

TEST(TunerMemo, RoundTripsThroughJsonAndNamesWhatIsWrong) {
  const TunerMemo m = sample_memo();
  EXPECT_EQ(TunerMemo::from_json(m.to_json()), m);
  TunerMemo never;  // no change yet: last_change_s is null
  EXPECT_TRUE(never.to_json()["last_change_s"].is_null());
  EXPECT_EQ(TunerMemo::from_json(never.to_json()), never);
  ASSERT_NE(m.find("3:prefetch", "buffer"), nullptr);
  EXPECT_EQ(m.find("3:prefetch", "buffer")->trial_from, 4);
  EXPECT_EQ(m.find("3:prefetch", "parallelism"), nullptr);

  auto error = [](const nlohmann::json& j) {
    try {
      TunerMemo::from_json(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json j = m.to_json();
  j["knobs"][1].erase("value");
  EXPECT_NE(error(j).find("tuner memo: knobs[1] has no \"value\""), std::string::npos) << error(j);
  j = m.to_json();
  j["version"] = 9;
  EXPECT_NE(error(j).find("version 9, this dataecho reads version 1"), std::string::npos);
  j = m.to_json();
  j["elapsed_s"] = "soon";
  EXPECT_NE(error(j).find("\"elapsed_s\" is not a number"), std::string::npos) << error(j);
}

TEST(TunerMemory, KeepsTheMostRecentlyUsedUpToItsCapacity) {
  TunerMemory memory(3);
  TunerMemo m;
  for (const char* key : {"a", "b", "c"}) {
    m.windows += 1;
    memory.store(key, m);
  }
  ASSERT_TRUE(memory.find("a"));  // now the most recently used: "b" is the oldest
  memory.store("d", m);
  EXPECT_EQ(memory.size(), 3u);
  EXPECT_FALSE(memory.find("b"));
  EXPECT_EQ(memory.find("a")->windows, 1);
  EXPECT_TRUE(memory.find("c"));
  EXPECT_TRUE(memory.find("d"));
  // Storing again replaces the entry and makes it the most recent.
  m.windows = 42;
  memory.store("c", m);
  memory.store("e", m);
  memory.store("f", m);
  EXPECT_EQ(memory.size(), 3u);
  EXPECT_EQ(memory.find("c")->windows, 42);
  EXPECT_FALSE(memory.find("a"));
  memory.clear();
  EXPECT_EQ(memory.size(), 0u);
  EXPECT_FALSE(memory.find("c"));
}

TEST(TunerMemory, TheProcessKeeps64Definitions) {
  EXPECT_EQ(TunerMemory::global()->capacity(), 64u);
  TunerMemory memory;
  for (int i = 0; i < 65; ++i) memory.store("definition " + std::to_string(i), TunerMemo{});
  EXPECT_EQ(memory.size(), 64u);
  EXPECT_FALSE(memory.find("definition 0"));
  EXPECT_TRUE(memory.find("definition 1"));
  EXPECT_TRUE(memory.find("definition 64"));
}

TEST(TunerMemory, TheKeyIgnoresSeedsBudgetsAndNames) {
  auto def = [](uint64_t seed, uint64_t shuffle_seed, double cpu, int64_t batch) {
    return range(1000)
        .map("random_noise", {{"size", 16}}, {.parallelism = kAutotune})
        .shuffle({.buffer = 10, .seed = shuffle_seed})
        .batch({.size = batch})
        .prefetch(kAutotune)
        .seed(seed)
        .autotune({.cpu_budget = cpu});
  };
  const std::string key = def(1, 2, 1.5, 8).tuner_memory_key();
  EXPECT_EQ(key.rfind("tuner:fnv1a64:", 0), 0u) << key;
  EXPECT_EQ(def(7, 9, 3, 8).tuner_memory_key(), key);
  PipelineDef forgetful = def(1, 2, 1.5, 8);
  forgetful.autotune({.remember = false});
  EXPECT_EQ(forgetful.tuner_memory_key(), key);
  nlohmann::json named = def(1, 2, 1.5, 8).to_json();
  named["name"] = "photos";
  EXPECT_EQ(PipelineDef::from_json(named).tuner_memory_key(), key);
  // What a stage does is part of the key.
  EXPECT_NE(def(1, 2, 1.5, 16).tuner_memory_key(), key);
  EXPECT_NE(range(1001)
                .map("random_noise", {{"size", 16}}, {.parallelism = kAutotune})
                .shuffle({.buffer = 10, .seed = 2})
                .batch({.size = 8})
                .prefetch(kAutotune)
                .tuner_memory_key(),
            key);
}

// A Tuner on a ManualClock with a memory of its own, one map knob ("1:map") whose
// counters are set by hand, as in TunerStepped: one window of 0.25 s moves the clock,
// the node's busy time (`threads` busy all of it), its elements and the consumer's wait.
struct SteppedTuner {
  explicit SteppedTuner(std::shared_ptr<TunerMemory> memory, bool remember = true,
                        int64_t initial = 1) {
    TunerOptions o = options();
    o.clock = clock;
    o.memory_key = "key";
    o.memory = std::move(memory);
    o.remember = remember;
    tuner = std::make_unique<Tuner>(o, out);
    knob = map_knob(initial);
    tuner->add(knob, stats);
  }
  std::optional<TunerChange> window(double threads_busy, int64_t elements, double wait = 0.5,
                                    double seconds = 0.25) {
    clock->advance_seconds(seconds, /*cores=*/1);
    stats->busy_ns += static_cast<int64_t>(threads_busy * seconds * 1e9);
    stats->elements += elements;
    out->next_ns += static_cast<int64_t>(wait * seconds * 1e9);
    return tuner->step();
  }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'000'000'000);
  std::shared_ptr<NodeStats> out = std::make_shared<NodeStats>("2:prefetch");
  std::shared_ptr<NodeStats> stats = std::make_shared<NodeStats>("1:map", true);
  std::unique_ptr<Tuner> tuner;
  std::shared_ptr<Knob> knob;
};

TEST(TunerRemembers, ANewTunerStartsFromTheLastOnesChoiceAndTime) {
  auto memory = std::make_shared<TunerMemory>();
  {
    SteppedTuner a(memory);
    EXPECT_FALSE(a.tuner->report()["resumed"].get<bool>());
    ASSERT_TRUE(a.window(1, 30));  // 1 -> 2 at 0.25 s (as in TunerStepped)
    // Stored after each window: the raise, on trial.
    ASSERT_TRUE(memory->find("key"));
    EXPECT_TRUE(memory->find("key")->knobs.at(0).trial);
    EXPECT_FALSE(a.window(2, 60, 0));  // 240/s against 120/s: kept; the consumer keeps up
  }
  const std::optional<TunerMemo> m = memory->find("key");
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->elapsed_s, 0.5);
  EXPECT_EQ(m->last_change_s, 0.25);
  EXPECT_EQ(m->windows, 2);
  ASSERT_EQ(m->knobs.size(), 1u);
  EXPECT_EQ(m->knobs[0], (TunerMemo::Knob{"1:map", "parallelism", 2, -1, false, 0, 0}));

  SteppedTuner b(memory);
  EXPECT_EQ(b.knob->value(), 2);  // before the node reads it
  EXPECT_EQ(b.stats->values().at("parallelism"), 2);
  nlohmann::json report = b.tuner->report();
  EXPECT_TRUE(report["resumed"].get<bool>());
  EXPECT_EQ(report["resumed_from"], "memory");
  EXPECT_TRUE(report["remember"].get<bool>());
  EXPECT_EQ(report["elapsed_s"], 0.5);
  // Still in the warm-up (at 0.75 s of the tuner's time): busy, consumer waiting: doubled.
  auto c = b.window(2, 60);
  ASSERT_TRUE(c) << b.tuner->report().dump();
  EXPECT_EQ(c->from, 2);
  EXPECT_EQ(c->to, 4);
  report = b.tuner->report();
  EXPECT_EQ(report["changes"][0]["t_s"], 0.8);  // 0.75, rounded to 0.1 s
  EXPECT_EQ(report["windows"], 1);
  EXPECT_EQ(b.tuner->memo()->windows, 3);
}

TEST(TunerRemembers, ARaiseTakenBackStaysLeftAloneInTheNextTuner) {
  auto memory = std::make_shared<TunerMemory>();
  {
    SteppedTuner a(memory);
    ASSERT_TRUE(a.window(1, 30));
    auto back = a.window(1, 30);  // 120/s again: taken back, left alone until 120.5 s
    ASSERT_TRUE(back);
    EXPECT_EQ(back->rule, Rule::kTakeBack);
  }
  ASSERT_TRUE(memory->find("key"));
  EXPECT_DOUBLE_EQ(memory->find("key")->knobs.at(0).blocked_until_s, 120.5);
  SteppedTuner b(memory);
  EXPECT_EQ(b.knob->value(), 1);
  EXPECT_FALSE(b.window(1, 30)) << b.tuner->report().dump();  // busy, waited on, but left alone
  EXPECT_EQ(b.knob->value(), 1);
  // A tuner that does not remember raises it at once.
  SteppedTuner fresh(memory, /*remember=*/false);
  EXPECT_FALSE(fresh.tuner->report()["remember"].get<bool>());
  EXPECT_FALSE(fresh.tuner->report()["resumed"].get<bool>());
  ASSERT_TRUE(fresh.window(1, 30));
  EXPECT_EQ(fresh.knob->value(), 2);
}

TEST(TunerRemembers, ARaiseOnTrialIsJudgedByTheNextTuner) {
  auto memory = std::make_shared<TunerMemory>();
  {
    SteppedTuner a(memory);
    ASSERT_TRUE(a.window(1, 30));  // 1 -> 2, then the pipeline goes before it is judged
  }
  const TunerMemo::Knob k = memory->find("key")->knobs.at(0);
  EXPECT_EQ(k.value, 2);
  EXPECT_TRUE(k.trial);
  EXPECT_EQ(k.trial_from, 1);
  EXPECT_DOUBLE_EQ(k.rate_before, 120);
  SteppedTuner b(memory);
  EXPECT_EQ(b.knob->value(), 2);
  // This pipeline's node makes 120/s at 2 threads, no more than before: taken back.
  auto c = b.window(1, 30);
  ASSERT_TRUE(c) << b.tuner->report().dump();
  EXPECT_EQ(c->rule, Rule::kTakeBack);
  EXPECT_EQ(c->to, 1);
  EXPECT_EQ(c->reason, "taken back: 120 -> 120 elements/s");
}

TEST(TunerRemembers, AfterTheWarmUpTheNextTunerWaitsForTheChangeInterval) {
  auto memory = std::make_shared<TunerMemory>();
  TunerMemo m;
  m.elapsed_s = 20;
  m.last_change_s = 15;
  m.knobs.push_back({"1:map", "parallelism", 3, -1, false, 0, 0});
  memory->store("key", m);
  SteppedTuner b(memory);
  EXPECT_EQ(b.knob->value(), 3);
  // 1 s windows after the warm-up; the next change 30 s after the last, at 45 s.
  EXPECT_FALSE(b.window(3, 300, 0.5, 1));
  EXPECT_FALSE(b.window(3, 300, 0.5, 23.5));  // 44.5 s
  auto c = b.window(3, 300, 0.5, 0.5);        // 45 s
  ASSERT_TRUE(c) << b.tuner->report().dump();
  EXPECT_EQ(c->from, 3);
  EXPECT_EQ(c->to, 4);  // by one after the warm-up
  EXPECT_EQ(b.tuner->report()["changes"][0]["t_s"], 45);
}

TEST(TunerRemembers, NothingIsStoredOrResumedWithoutRememberOrAKey) {
  auto memory = std::make_shared<TunerMemory>();
  {
    SteppedTuner a(memory, /*remember=*/false);
    ASSERT_TRUE(a.window(1, 30));
  }
  EXPECT_EQ(memory->size(), 0u);
  // Without a key (a Pipeline made by hand): nothing either.
  auto clock = std::make_shared<ManualClock>();
  TunerOptions o = options();
  o.clock = clock;
  o.memory = memory;
  {
    Tuner t(o, std::make_shared<NodeStats>("2:prefetch"));
    t.add(map_knob(1), std::make_shared<NodeStats>("1:map", true));
    clock->advance_seconds(0.25);
    t.step();
  }
  EXPECT_EQ(memory->size(), 0u);
  // A memo given by hand (a restored state) is ignored without remember.
  SteppedTuner b(memory, /*remember=*/false);
  TunerMemo m;
  m.knobs.push_back({"1:map", "parallelism", 5, -1, false, 0, 0});
  b.tuner->resume(m);
  EXPECT_EQ(b.knob->value(), 1);
  // ... and taken with it, at once, with the memo's time.
  SteppedTuner c(memory);
  m.elapsed_s = 40;
  c.tuner->resume(m);
  EXPECT_EQ(c.knob->value(), 5);
  EXPECT_EQ(c.tuner->report()["resumed_from"], "state");
  EXPECT_EQ(c.tuner->report()["elapsed_s"], 40);
}

}  // namespace
}  // namespace dataecho
