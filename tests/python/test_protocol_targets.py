"""The reading of "reaching the target" registered in docs/protocol.md change 8
(experiments/protocol/targets.py) and the swing it rests on (swing.py), on synthetic
trajectories with known answers, and the statistics against the committed tables."""

import importlib.util
import json
import math
import random
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("numpy")  # targets.py needs it (Debian: python3-numpy)


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / "protocol" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


targets = _load("targets")
swing = _load("swing")


def run(accs, steps_apart=20, fresh_per_step=128):
    """A run's evaluations from accuracies (fractions), one every `steps_apart` steps."""
    ev = []
    for i, a in enumerate(accs):
        step = (i + 1) * steps_apart
        ev.append({"step": step, "fresh": step * fresh_per_step, "accuracy": a,
                   "wall_seconds": float(step)})
    last = ev[-1]
    return {"seed": 1, "evals": ev,
            "summary": {"fresh": last["fresh"], "wall_seconds": last["wall_seconds"] + 1,
                        "steps": last["step"], "final_accuracy": last["accuracy"]}}


T = 9000  # 90.00% in basis points; the margin is 104 (1.04 points)


def test_a_lucky_single_crossing_does_not_count():
    # Touches 90.0% once, then falls to 88.5% (below 90 - 1.04), then holds from 90.1%.
    accs = [0.880, 0.890, 0.900, 0.885, 0.891, 0.901, 0.897, 0.899, 0.902]
    r = run(accs)
    assert targets.first_touch(r["evals"], T) == 2
    assert targets.held(r["evals"], T) == 5
    o = targets.observe(r, T, "held")
    assert o == {"fresh": 6 * 20 * 128, "wall": 120.0, "censored": False, "step": 120}


def test_a_lasting_crossing_counts_at_its_first_evaluation():
    # Dips after the crossing stay above 90 - 1.04 = 88.96%: held from the first touch.
    accs = [0.870, 0.885, 0.900, 0.8897, 0.8960, 0.905, 0.903]
    r = run(accs)
    assert targets.first_touch(r["evals"], T) == 2
    assert targets.held(r["evals"], T) == 2


def test_a_dip_exactly_at_the_floor_keeps_the_target_and_one_below_loses_it():
    assert targets.held(run([0.900, 0.8896, 0.901])["evals"], T) == 0
    assert targets.held(run([0.900, 0.8895, 0.901])["evals"], T) == 2


def test_never_held_is_censored_at_the_budget():
    # Touches the target, then ends below the floor: no evaluation holds it.
    r = run([0.880, 0.900, 0.895, 0.905, 0.880])
    assert targets.first_touch(r["evals"], T) == 1
    assert targets.held(r["evals"], T) is None
    o = targets.observe(r, T, "held")
    assert o["censored"] and o["fresh"] == r["summary"]["fresh"]
    assert o["wall"] == r["summary"]["wall_seconds"]
    # Never reached at all: censored under both readings.
    r = run([0.85, 0.86, 0.87])
    assert targets.observe(r, T, "first_touch")["censored"]
    assert targets.observe(r, T, "held")["censored"]


def test_a_cut_trajectory_is_censored_at_its_last_evaluation_before_the_cut():
    r = run([0.880, 0.885, 0.886, 0.900, 0.905])  # steps 20..100
    o = targets.observe(r, T, "first_touch", stop_step=60)
    assert o["censored"] and o["step"] == 60 and o["fresh"] == 60 * 128
    assert targets.observe(r, T, "held", stop_step=100)["step"] == 80


def test_thinning_keeps_one_evaluation_per_100_steps_and_the_last():
    r = run([0.5] * 30, steps_apart=37)  # steps 37, 74, ..., 1110
    kept = [e["step"] for e in targets.thin(r["evals"])]
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
    f = targets.final_and_swing(runs, 100)
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
    assert targets.final_and_swing(runs, 10_000)["sigma_late_points"] is None


def test_the_censored_median_marks_a_median_that_falls_on_a_censored_run():
    assert targets.censored_median([(1, False), (2, True), (3, False)]) == (2, True)
    assert targets.censored_median([(1, False), (2, False), (3, True)]) == (2, False)
    # A tie puts the run that reached first (as run_statistics.cc does); an even count
    # is censored when either middle run is.
    assert targets.censored_median([(2, True), (2, False), (1, False)]) == (2, False)
    assert targets.censored_median([(1, False), (2, True), (3, False), (5, False)]) == (2.5, True)


@pytest.mark.skipif(not (ROOT / "results" / "protocol" / "network-r5" / "results.json").exists(),
                    reason="no committed network runs")
def test_the_statistics_reproduce_the_committed_tables():
    sys.path.insert(0, str(ROOT))
    from experiments import archive
    for exp in ("network-r5", "sweep"):
        d = ROOT / "results" / "protocol" / exp
        archive.unpack(d)  # the committed runs, into cells/ (git-ignored) where targets.py reads
        checked, bad = targets.check_against_committed(str(d), targets.load_all_seeds(str(d)))
        assert checked >= 10 and bad == []


def _write_cell(root, exp, cell, accs_by_seed, fresh_per_step, first_seed=1):
    for seed, accs in enumerate(accs_by_seed, start=first_seed):
        r = run(accs, fresh_per_step=fresh_per_step)
        d = Path(root) / exp / "cells" / cell / f"seed-{seed}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(r["summary"]))
        (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in r["evals"]))


def test_control_c_takes_each_cells_best_budget_where_3_of_5_hold(tmp_path):
    # Change 9's C: per cell, the budget with the smallest median fresh examples to hold
    # 90% among the budgets at which at least 3 of 5 seeds hold it. Evaluations every 20
    # steps; the baseline reads 128 fresh examples a step, e = 4 32.
    held_at = lambda i, n: [0.85] * i + [0.905] * (n - i)  # noqa: E731
    never = [0.85] * 10
    budgets = {  # budget -> (baseline seeds, e = 4 seeds)
        1950: ([held_at(8, 10)] * 2 + [never] * 3, [held_at(2, 10)] * 5),
        2925: ([held_at(5, 10)] * 5, [held_at(4, 10)] * 5),
        3900: ([held_at(6, 10)] * 5, [held_at(3, 10)] * 5),
        5850: ([held_at(7, 10)] * 5, [held_at(6, 10)] * 5),
    }
    for S, (base, e4) in budgets.items():
        exp, suffix = ("network-r5", "") if S == 3900 else ("controls", f"-s{S}")
        _write_cell(tmp_path, exp, "baseline" + suffix, base, 128)
        _write_cell(tmp_path, exp, "before_aug-e4-sb1000" + suffix, e4, 32)
    c = targets.controls_section(str(tmp_path))["C"]
    # The baseline at 1,950 holds in 2 of 5 only: its best is 2,925 (the 6th evaluation,
    # step 120, 15,360 fresh); e = 4's is 1,950 (the 3rd, step 60, 1,920 fresh).
    assert c["baseline"]["budgets"]["1950"]["held"] == 2
    assert c["baseline"]["best_budget"] == 2925 and c["e4"]["best_budget"] == 1950
    assert c["baseline"]["complete"] and c["e4"]["complete"]
    assert c["reduction"]["ratio"] == pytest.approx(15360 / 1920)
    assert c["verdict"] == "refutes C"  # the whole interval (8x, every seed alike) above 4


def test_controls_b_and_a2_read_the_group_winners_and_batch_augmentation(tmp_path):
    # Change 9's B: e = 4's reduction over the re-tuned baseline, each variant's tuning
    # group winner being the one cell with final seeds (the others hold tuning runs only);
    # refutes B when the interval lies wholly above 4. A2: batch augmentation (128 fresh
    # a step) against the batch-128 baseline of network-r5; supports A when above 1.
    held_at = lambda i, n: [0.85] * i + [0.905] * (n - i)  # noqa: E731
    assert targets.retune_section(str(tmp_path)) is None  # nothing has run
    # Tuning runs only: the losing members and the unfinished cells have no seeds.
    (tmp_path / "retune" / "cells" / "baseline" / "tune" / "lr-0.05" / "seed-101").mkdir(parents=True)
    _write_cell(tmp_path, "network-r5", "baseline", [held_at(6, 10)] * 10, 128)
    # Seeds 1-5 of the winners: read as partial (seeds 1-5) while 6-10 run.
    _write_cell(tmp_path, "retune", "baseline-wd1e-3", [held_at(6, 10)] * 5, 128)
    _write_cell(tmp_path, "retune", "before_aug-e4-sb1000", [held_at(4, 10)] * 5, 32)
    b = targets.retune_section(str(tmp_path))["B"]
    assert b["seeds"] == [1, 2, 3, 4, 5]
    assert b["baseline_cell"] == "baseline-wd1e-3" and b["e4_cell"] == "before_aug-e4-sb1000"
    # Held from the 7th evaluation (step 140) and the 5th (step 100).
    assert b["figures"]["fresh_reduction"]["ratio"] == pytest.approx(140 * 128 / (100 * 32))
    assert b["verdict"] == "refutes B"
    # All 10 seeds, e = 4 now holding later: 5.6x becomes 140 x 128 / (200 x 32) = 2.8x.
    for cell in ("baseline-wd1e-3", "before_aug-e4-sb1000"):
        shutil.rmtree(tmp_path / "retune" / "cells" / cell)
    _write_cell(tmp_path, "retune", "baseline-wd1e-3", [held_at(6, 10)] * 10, 128)
    _write_cell(tmp_path, "retune", "before_aug-e4-sb1000", [held_at(9, 10)] * 10, 32)
    _write_cell(tmp_path, "retune", "batchaug-e2-bs256", [held_at(3, 10)] * 10, 128)
    r = targets.retune_section(str(tmp_path))
    assert r["B"]["seeds"] == list(range(1, 11))
    assert r["B"]["figures"]["fresh_reduction"]["ratio"] == pytest.approx(2.8)
    assert r["B"]["verdict"] == "supports B"
    assert r["A2"]["seeds"] == list(range(1, 11))
    assert r["A2"]["figures"]["fresh_reduction"]["ratio"] == pytest.approx(140 / 80)
    assert r["A2"]["supports_A"]


def _set_machine(root, exp, cell, seeds, r_estimate, wall_scale):
    """Give a cell's seeds an R in training and scale their clock (the other machine)."""
    for seed in seeds:
        d = Path(root) / exp / "cells" / cell / f"seed-{seed}"
        summ = json.loads((d / "summary.json").read_text())
        summ["r_estimate"] = r_estimate
        summ["wall_seconds"] *= wall_scale
        (d / "summary.json").write_text(json.dumps(summ))
        evals = [json.loads(x) for x in (d / "evals.jsonl").read_text().splitlines()]
        for e in evals:
            e["wall_seconds"] *= wall_scale
        (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))


def test_change_12_reads_seeds_1_10_pooled_and_per_machine(tmp_path):
    # The baseline and e = 5 on seeds 1-10, e = 4 on 1-5 only. Every seed holds 90% from
    # the same evaluation (baseline the 7th, step 140; e = 5 the 5th, step 100), so each
    # reading's interval is a point. On seeds 6-10 e = 5's clock runs twice as fast.
    held_at = lambda i, n: [0.85] * i + [0.905] * (n - i)  # noqa: E731
    exp = tmp_path / "network-r5"
    _write_cell(tmp_path, "network-r5", "baseline", [held_at(6, 10)] * 5, 128)
    _write_cell(tmp_path, "network-r5", "before_aug-e5-sb1000", [held_at(4, 10)] * 5, 128 // 5)
    _set_machine(tmp_path, "network-r5", "baseline", range(1, 6), 4.8, 1.0)
    _set_machine(tmp_path, "network-r5", "before_aug-e5-sb1000", range(1, 6), 5.3, 1.0)
    runs = targets.load_all_seeds(str(exp))
    assert targets.seeds_text(runs["baseline"]) == "1-5"
    assert targets.machines_section(runs, "before_aug-e5-sb1000") is None  # one machine only
    for cell, per_step, at, r, scale in (("baseline", 128, 6, 6.0, 1.0),
                                          ("before_aug-e5-sb1000", 128 // 5, 4, 6.5, 0.5)):
        _write_cell(tmp_path, "network-r5", cell, [held_at(at, 10)] * 5, per_step, first_seed=6)
        _set_machine(tmp_path, "network-r5", cell, range(6, 11), r, scale)
    _write_cell(tmp_path, "network-r5", "before_aug-e4-sb1000", [held_at(5, 10)] * 5, 32)
    runs = targets.load_all_seeds(str(exp))
    assert [r["seed"] for r in runs["baseline"]] == list(range(1, 11))
    assert targets.seeds_text(runs["before_aug-e4-sb1000"]) == "1-5"
    m = targets.machines_section(runs, "before_aug-e5-sb1000")
    assert list(m["cells"]) == ["before_aug-e5-sb1000"]  # e = 4 lacks seeds 6-10
    by = m["cells"]["before_aug-e5-sb1000"]["by_seeds"]
    old, new = by["seeds 1-5 (2026-12-01)"], by["seeds 6-10 (2026-12-05)"]
    assert old["held"]["speedup"]["ratio"] == pytest.approx(140 / 100)
    assert new["held"]["speedup"]["ratio"] == pytest.approx(140 / 50)
    assert old["r_train_baseline"] == pytest.approx(4.8) and old["ideal"] == pytest.approx(4.8)
    assert new["r_train_baseline"] == pytest.approx(6.0) and new["ideal"] == 5
    # Fresh examples do not depend on the clock: the same reduction on both machines.
    for b in by.values():
        assert b["held"]["fresh_reduction"]["ratio"] == pytest.approx(140 * 128 / (100 * 25))
    pooled = by["seeds 1-10 (both machines)"]
    assert pooled["seeds"] == list(range(1, 11)) and pooled["held"]["runs"] == 10
    assert not m["cells"]["before_aug-e5-sb1000"]["held_speedup_intervals_overlap"]
    assert m["pooled_is_headline"] is False
