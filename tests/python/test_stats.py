"""dataecho.stats, the engine's run statistics bound: the answers the C++ tests pin
(tests/core/run_statistics_test.cc), the bits of the Python replica the experiments'
tables were computed with (experiments/protocol/targets.py as of this binding; its
figures copied here, not imported), and clear errors for wrong input."""

import math

import pytest

import dataecho as de
from dataecho import stats


def reached(values):
    return list(values), [False] * len(values)


# ---- the answers tests/core/run_statistics_test.cc pins ----


def test_median_of_odd_and_even_counts():
    assert stats.median_of([5, 1, 3]) == 3
    assert stats.median_of([4, 1, 3, 2]) == 2.5
    assert stats.median_of([7]) == 7
    assert stats.median_of([]) == 0.0


def test_constant_runs_have_a_point_interval():
    assert stats.estimate_median(*reached([100] * 5)) == {
        "median": 100.0, "ci95": [100.0, 100.0], "n": 5, "censored": 0, "median_censored": False}


def test_bootstrap_interval_of_three_runs_is_their_range():
    assert stats.estimate_median(*reached([3, 1, 2]))["ci95"] == [1.0, 3.0]
    assert stats.estimate_median(*reached([3, 1, 2]), level=0.4)["ci95"] == [2.0, 2.0]


def test_censored_runs_count_at_their_budget():
    e = stats.estimate_median([10, 20, 100, 100, 100], [False, False, True, True, True])
    assert (e["median"], e["median_censored"], e["censored"]) == (100.0, True, 3)
    f = stats.estimate_median([10, 20, 30, 40, 100], [False] * 4 + [True])
    assert (f["median"], f["median_censored"], f["censored"]) == (30.0, False, 1)


def test_pinned_intervals_under_the_fixed_seed():
    e = stats.estimate_median(*reached([12, 15, 9, 20, 11, 14, 13]))
    assert e == {"median": 13.0, "ci95": [11.0, 15.0], "n": 7, "censored": 0, "median_censored": False}
    r = stats.estimate_ratio(*reached([90, 100, 110, 95, 105]), *reached([20, 25, 30, 22]))
    assert r == {"ratio": 100 / 23.5, "ci95": [100 / 30, 5.0], "censored": False}


def test_ratio_of_medians():
    assert stats.estimate_ratio(*reached([100] * 3), *reached([25] * 3)) == {
        "ratio": 4.0, "ci95": [4.0, 4.0], "censored": False}
    c = stats.estimate_ratio(*reached([100] * 3), [50, 50, 20], [True, True, False])
    assert c["censored"] is True
    assert stats.estimate_ratio([], [], *reached([1])) is None
    assert stats.estimate_median([], []) is None


# ---- the figures of experiments/protocol/targets.py's replica, bit for bit ----
# Computed with its estimate_median / estimate_ratio (xoshiro256** seeded by SplitMix64,
# Lemire draws, numpy medians) when the binding replaced it; the second pair with its
# LEVEL = 0.9, RESAMPLES = 2000, BOOT_SEED = 7.

A = ([310.5, 402.25, 288.0, 500.0, 500.0, 351.75], [False, False, False, True, True, False])
B = ([1200.0, 1350.5, 1100.0, 1500.0, 1500.0], [False, False, False, True, True])
C = ([400.0, 390.25, 455.0, 600.0, 380.0], [False, False, False, True, False])


def test_the_replicas_figures_at_the_protocols_settings():
    assert stats.estimate_median(*A) == {
        "median": 377.0, "ci95": [299.25, 500.0], "n": 6, "censored": 2, "median_censored": False}
    assert stats.estimate_median(*B) == {
        "median": 1350.5, "ci95": [1100.0, 1500.0], "n": 5, "censored": 2, "median_censored": False}
    assert stats.estimate_ratio(*B, *C) == {
        "ratio": 3.37625, "ci95": [2.2508333333333335, 3.8436899423446507], "censored": False}
    assert stats.estimate_ratio(*A, *C) == {
        "ratio": 0.9425, "ci95": [0.6283333333333333, 1.2812299807815504], "censored": False}
    assert stats.estimate_ratio(*B, [0.0, 0.0, 1.0], [False] * 3) is None  # cell median 0


def test_the_replicas_figures_at_other_settings():
    other = {"level": 0.9, "resamples": 2000, "seed": 7}
    assert stats.estimate_median(*A, **other) == {
        "median": 377.0, "ci95": [310.5, 500.0], "n": 6, "censored": 2, "median_censored": False}
    assert stats.estimate_ratio(*B, *C, **other) == {
        "ratio": 3.37625, "ci95": [2.4175824175824174, 3.8436899423446507], "censored": False}


def test_the_figures_are_plain_python_values():
    e = stats.estimate_median(*A)
    assert [type(e[k]) for k in ("median", "n", "censored", "median_censored")] == [float, int, int, bool]
    assert all(type(x) is float for x in e["ci95"])


# ---- wrong input ----


@pytest.mark.parametrize("call, message", [
    (lambda: stats.estimate_median([1.0, 2.0], [False]),
     r"estimate_median: values and censored differ in length \(2 and 1\): one flag per value"),
    (lambda: stats.estimate_ratio([1.0], [False], [1.0, 2.0], [False]),
     r"estimate_ratio: cell_values and cell_censored differ in length \(2 and 1\): one flag per value"),
    (lambda: stats.estimate_ratio([1.0], [], [1.0], [False]),
     r"estimate_ratio: base_values and base_censored differ in length \(1 and 0\): one flag per value"),
    (lambda: stats.estimate_median([1.0], [False], level=1.0),
     r"estimate_median: level must be in \(0, 1\), got 1"),
    (lambda: stats.estimate_ratio([1.0], [False], [1.0], [False], level=0.0),
     r"estimate_ratio: level must be in \(0, 1\), got 0"),
    (lambda: stats.estimate_median([1.0], [False], resamples=0),
     "estimate_median: resamples must be at least 1, got 0"),
    (lambda: stats.estimate_median([1.0, math.nan], [False, False]),
     "estimate_median: value 1 is nan: every value must be finite"),
    (lambda: stats.estimate_ratio([math.inf], [False], [1.0], [False]),
     "estimate_ratio: baseline value 0 is inf: every value must be finite"),
    (lambda: stats.median_of([2.0, -math.inf]),
     "median_of: value 1 is -inf: every value must be finite"),
    (lambda: stats.estimate_median([1.0], [False], seed=-1),
     r"estimate_median: seed must be in \[0, 2\*\*64\), got -1"),
    (lambda: stats.estimate_ratio([1.0], [False], [1.0], [False], seed=2**64),
     r"estimate_ratio: seed must be in \[0, 2\*\*64\), got 18446744073709551616"),
])
def test_wrong_input_is_a_value_error_that_says_what(call, message):
    with pytest.raises(ValueError, match="^" + message + "$") as info:
        call()
    assert isinstance(info.value, de.SpecError)


def test_the_options_are_keywords():
    with pytest.raises(TypeError):
        stats.estimate_median([1.0], [False], 100)
