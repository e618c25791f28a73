// The report's arithmetic on inputs with known answers: medians with censored runs, the
// percentile bootstrap of a median, and ratios of medians (reduction, speedup).
// tests/python/test_stats.py checks the Python binding (dataecho.stats) on the same answers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/core/run_statistics.h"

namespace dataecho {
namespace {

std::vector<Observation> reached(std::vector<double> values) {
  std::vector<Observation> out;
  for (double v : values) out.push_back({v, false});
  return out;
}

TEST(RunStatisticsTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median_of({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({7}), 7);
}

TEST(RunStatisticsTest, ConstantRunsHaveAPointInterval) {
  auto e = estimate_median(reached({100, 100, 100, 100, 100}));
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->median, 100);
  EXPECT_DOUBLE_EQ(e->ci.lo, 100);
  EXPECT_DOUBLE_EQ(e->ci.hi, 100);
  EXPECT_EQ(e->n, 5);
  EXPECT_EQ(e->censored, 0);
  EXPECT_FALSE(e->median_censored);
}

// Three runs {1, 2, 3}: the median of a resample is 1 with probability 7/27, 2 with
// 13/27 and 3 with 7/27, so the 2.5% and 97.5% quantiles are 1 and 3.
TEST(RunStatisticsTest, BootstrapIntervalOfThreeRunsIsTheirRange) {
  auto e = estimate_median(reached({3, 1, 2}));
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->median, 2);
  EXPECT_DOUBLE_EQ(e->ci.lo, 1);
  EXPECT_DOUBLE_EQ(e->ci.hi, 3);
  // At the 40% level (quantiles 0.3 and 0.7) both ends fall on 2: P(median <= 1) =
  // 0.26 < 0.3 and P(median <= 2) = 0.74 >= 0.7.
  BootstrapOptions narrow;
  narrow.level = 0.4;
  auto n = estimate_median(reached({3, 1, 2}), narrow);
  EXPECT_DOUBLE_EQ(n->ci.lo, 2);
  EXPECT_DOUBLE_EQ(n->ci.hi, 2);
}

TEST(RunStatisticsTest, IntervalIsDeterministicAndWithinTheData) {
  auto v = reached({12, 15, 9, 20, 11, 14, 13});
  auto a = estimate_median(v);
  auto b = estimate_median(v);
  EXPECT_EQ(a->ci.lo, b->ci.lo);
  EXPECT_EQ(a->ci.hi, b->ci.hi);
  EXPECT_GE(a->ci.lo, 9);
  EXPECT_LE(a->ci.hi, 20);
  EXPECT_LE(a->ci.lo, a->median);
  EXPECT_GE(a->ci.hi, a->median);
  EXPECT_LT(a->ci.lo, a->ci.hi);
}

TEST(RunStatisticsTest, CensoredRunsCountAtTheirBudget) {
  // Two reached, three ran out at a budget of 100: the median is censored (>= 100).
  std::vector<Observation> runs = {{10, false}, {20, false}, {100, true}, {100, true}, {100, true}};
  auto e = estimate_median(runs);
  EXPECT_DOUBLE_EQ(e->median, 100);
  EXPECT_TRUE(e->median_censored);
  EXPECT_EQ(e->censored, 3);
  // One censored of five, not at the median: the median stands.
  std::vector<Observation> one = {{10, false}, {20, false}, {30, false}, {40, false}, {100, true}};
  auto f = estimate_median(one);
  EXPECT_DOUBLE_EQ(f->median, 30);
  EXPECT_FALSE(f->median_censored);
  EXPECT_EQ(f->censored, 1);
}

TEST(RunStatisticsTest, RatioOfMediansWithItsInterval) {
  auto r = estimate_ratio(reached({100, 100, 100}), reached({25, 25, 25}));
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->ratio, 4);
  EXPECT_DOUBLE_EQ(r->ci.lo, 4);
  EXPECT_DOUBLE_EQ(r->ci.hi, 4);
  EXPECT_FALSE(r->censored);
  // Baseline {90, 100, 110} over a cell {20, 25, 30}: the ratio is 4, the interval's
  // ends are extreme combinations: 90/30 = 3 and 110/20 = 5.5 bound it.
  auto s = estimate_ratio(reached({90, 100, 110}), reached({20, 25, 30}));
  EXPECT_DOUBLE_EQ(s->ratio, 4);
  EXPECT_GE(s->ci.lo, 3.0);
  EXPECT_LE(s->ci.hi, 5.5);
  EXPECT_LT(s->ci.lo, 4);
  EXPECT_GT(s->ci.hi, 4);
  // A censored cell median bounds the ratio from above only: flagged.
  auto c = estimate_ratio(reached({100, 100, 100}), {{50, true}, {50, true}, {20, false}});
  EXPECT_TRUE(c->censored);
  EXPECT_FALSE(estimate_ratio({}, reached({1})));
}

// The exact interval of a spread-out input under the fixed seed: the binding and the
// experiments' tables rest on these bits (tests/python/test_stats.py pins the same).
TEST(RunStatisticsTest, PinnedIntervalsUnderTheFixedSeed) {
  auto e = estimate_median(reached({12, 15, 9, 20, 11, 14, 13}));
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->median, 13);
  EXPECT_DOUBLE_EQ(e->ci.lo, 11);
  EXPECT_DOUBLE_EQ(e->ci.hi, 15);
  auto r = estimate_ratio(reached({90, 100, 110, 95, 105}), reached({20, 25, 30, 22}));
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->ratio, 100.0 / 23.5);
  EXPECT_DOUBLE_EQ(r->ci.lo, 100.0 / 30);
  EXPECT_DOUBLE_EQ(r->ci.hi, 5);
}

// What the function, option or value is wrong, in the message.
std::string error_of(auto f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "no error";
}

TEST(RunStatisticsTest, BadOptionsAndValuesAreErrors) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  BootstrapOptions none;
  none.resamples = 0;
  EXPECT_EQ(error_of([&] {
              estimate_median(reached({1, 2}), none);
            }),
            "estimate_median: resamples must be at least 1, got 0");
  BootstrapOptions whole;
  whole.level = 1;
  EXPECT_EQ(error_of([&] { estimate_ratio(reached({1}), reached({1}), whole); }),
            "estimate_ratio: level must be in (0, 1), got 1");
  whole.level = nan;
  EXPECT_EQ(error_of([&] { estimate_median(reached({1}), whole); }),
            "estimate_median: level must be in (0, 1), got nan");
  EXPECT_EQ(error_of([&] {
              estimate_median({{1, false}, {nan, true}});
            }),
            "estimate_median: value 1 is nan: every value must be finite");
  EXPECT_EQ(error_of([&] {
              estimate_ratio(reached({1}), reached({2, -inf}));
            }),
            "estimate_ratio: cell value 1 is -inf: every value must be finite");
  EXPECT_EQ(error_of([&] { median_of({inf}); }),
            "median_of: value 0 is inf: every value must be finite");
  // Checked before the empty answer: a wrong call is wrong whatever the data.
  EXPECT_EQ(error_of([&] { estimate_median({}, none); }),
            "estimate_median: resamples must be at least 1, got 0");
  EXPECT_DOUBLE_EQ(median_of({}), 0);
}

}  // namespace
}  // namespace dataecho
