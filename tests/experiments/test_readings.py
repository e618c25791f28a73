"""The readings of "reaching the target" (experiments/protocol/readings.py: the first
touch, the held rule and its thinned check) and the swing they rest on, on synthetic
trajectories with known answers."""

import math
import random

import pytest

from experiments import stats
from experiments.protocol import readings, swing
from synthetic import run

T = 9000  # 90.00% in basis points; the margin is 104 (1.04 points)


def test_a_lucky_single_crossing_does_not_count():
    # Touches 90.0% once, then falls to 88.5% (below 90 - 1.04), then holds from 90.1%.
    accs = [0.880, 0.890, 0.900, 0.885, 0.891, 0.901, 0.897, 0.899, 0.902]
    r = run(accs)
    assert readings.first_touch(r["evals"], T) == 2
    assert readings.held(r["evals"], T) == 5
    o = readings.observe(r, T, "held")
    assert o == {"fresh": 6 * 20 * 128, "wall": 120.0, "censored": False, "step": 120}


def test_a_lasting_crossing_counts_at_its_first_evaluation():
    # Dips after the crossing stay above 90 - 1.04 = 88.96%: held from the first touch.
    accs = [0.870, 0.885, 0.900, 0.8897, 0.8960, 0.905, 0.903]
    r = run(accs)
    assert readings.first_touch(r["evals"], T) == 2
    assert readings.held(r["evals"], T) == 2


def test_a_dip_exactly_at_the_floor_keeps_the_target_and_one_below_loses_it():
    assert readings.held(run([0.900, 0.8896, 0.901])["evals"], T) == 0
    assert readings.held(run([0.900, 0.8895, 0.901])["evals"], T) == 2


def test_never_held_is_censored_at_the_budget():
    # Touches the target, then ends below the floor: no evaluation holds it.
    r = run([0.880, 0.900, 0.895, 0.905, 0.880])
    assert readings.first_touch(r["evals"], T) == 1
    assert readings.held(r["evals"], T) is None
    o = readings.observe(r, T, "held")
    assert o["censored"] and o["fresh"] == r["summary"]["fresh"]
    assert o["wall"] == r["summary"]["wall_seconds"]
    # Never reached at all: censored under both readings.
    r = run([0.85, 0.86, 0.87])
    assert readings.observe(r, T, "first_touch")["censored"]
    assert readings.observe(r, T, "held")["censored"]


def test_a_cut_trajectory_is_censored_at_its_last_evaluation_before_the_cut():
    r = run([0.880, 0.885, 0.886, 0.900, 0.905])  # steps 20..100
    o = readings.observe(r, T, "first_touch", stop_step=60)
    assert o["censored"] and o["step"] == 60 and o["fresh"] == 60 * 128
    assert readings.observe(r, T, "held", stop_step=100)["step"] == 80


def test_thinning_keeps_one_evaluation_per_100_steps_and_the_last():
    r = run([0.5] * 30, steps_apart=37)  # steps 37, 74, ..., 1110
    kept = [e["step"] for e in readings.thin(r["evals"])]
    assert kept[0] == 111 and kept[-1] == 1110
    assert len(kept) == len(set(kept))
    assert all(b - a <= 2 * 37 + 100 for a, b in zip(kept, kept[1:]))


def test_the_swing_of_a_trend_plus_known_noise():
    rng = random.Random(7)
    sigma = 0.005
    series = [[0.85 + 0.00002 * i + rng.gauss(0, sigma) for i in range(500)] for _ in range(5)]
    est, n = swing.swing(series)
    assert n == 5 * 499
    assert abs(est - sigma) / sigma < 0.05
    # A smooth trend alone has (almost) no swing.
    est, _ = swing.swing([[0.85 + 0.0001 * i for i in range(100)]])
    assert est < 1e-9


def test_final_accuracy_and_late_swing_count_only_the_differences_from_late_on():
    # Evaluations every 20 steps; from step 100 on they alternate 0.90 / 0.91, so every
    # late difference is +-0.01 (the swing: their sample std over sqrt(2), in points).
    early = [0.5, 0.6, 0.7, 0.8]  # steps 20-80: large differences, before late_from
    late = [0.90, 0.91] * 5       # steps 100-280
    runs = [run(early + late), run(early + late[:-1])]
    f = readings.final_and_swing(runs, 100)
    assert f["final_accuracy_by_seed"] == [0.91, 0.90]
    assert f["final_accuracy_median"] == pytest.approx(0.905)
    d = [0.01, -0.01] * 4 + [0.01] + [0.01, -0.01] * 4
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    assert f["sigma_late_points"] == pytest.approx(sd / math.sqrt(2) * 100)
    # Thinned to one per 100 steps: steps 100 (0.90) and 200 (0.91), and each run's last
    # (step 280 at 0.91, step 260 at 0.90).
    dt = [0.01, 0.0, 0.01, -0.01]
    mean = sum(dt) / len(dt)
    sdt = math.sqrt(sum((x - mean) ** 2 for x in dt) / (len(dt) - 1))
    assert f["sigma_late_thinned_points"] == pytest.approx(sdt / math.sqrt(2) * 100)
    # Nothing late enough: no swing rather than a NaN.
    assert readings.final_and_swing(runs, 10_000)["sigma_late_points"] is None


def median_of(obs):
    e = stats.estimate_median(obs)
    return e["median"], e["median_censored"]


def test_the_censored_median_marks_a_median_that_falls_on_a_censored_run():
    assert median_of([(1, False), (2, True), (3, False)]) == (2, True)
    assert median_of([(1, False), (2, False), (3, True)]) == (2, False)
    # A tie puts the run that reached first (as run_statistics.cc does); an even count
    # is censored when either middle run is.
    assert median_of([(2, True), (2, False), (1, False)]) == (2, False)
    assert median_of([(1, False), (2, True), (3, False), (5, False)]) == (2.5, True)
