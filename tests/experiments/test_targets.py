"""The tables of experiments/protocol/targets.py and the sections beside them (controls,
retune, per-machine reading) on synthetic run files with known answers, a whole
targets.json and table.txt from a small fixture, and the committed tables' 90%
first-touch figures recomputed exactly."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import archive, runfiles
from experiments.protocol import controls, network, readings, targets
from synthetic import write_cell

ROOT = Path(__file__).resolve().parents[2]

def committed_runs(exp, tmp_path):
    """results/protocol/EXP's run files: its archive (experiments/archive.py) unpacked
    beside a copy of its results.json, or the folder itself where it has none."""
    d = ROOT / "results" / "protocol" / exp
    if not (d / archive.ARCHIVE).exists():
        return d
    out = tmp_path / exp
    archive.unpack(d, out)
    shutil.copy(d / "results.json", out / "results.json")
    return out


def test_the_statistics_reproduce_the_committed_tables(tmp_path):
    for exp in ("network-r5", "sweep"):
        d = committed_runs(exp, tmp_path)
        checked, bad = targets.check_against_committed(str(d), readings.load_all_seeds(str(d)))
        assert checked >= 10 and bad == []


def test_control_c_takes_each_cells_best_budget_where_3_of_5_hold(tmp_path):
    # Control C: per cell, the budget with the smallest median fresh examples to hold
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
        write_cell(tmp_path, exp, "baseline" + suffix, base, 128)
        write_cell(tmp_path, exp, "before_aug-e4-sb1000" + suffix, e4, 32)
    c = controls.controls_section(str(tmp_path))["C"]
    # The baseline at 1,950 holds in 2 of 5 only: its best is 2,925 (the 6th evaluation,
    # step 120, 15,360 fresh); e = 4's is 1,950 (the 3rd, step 60, 1,920 fresh).
    assert c["baseline"]["budgets"]["1950"]["held"] == 2
    assert c["baseline"]["best_budget"] == 2925 and c["e4"]["best_budget"] == 1950
    assert c["baseline"]["complete"] and c["e4"]["complete"]
    assert c["reduction"]["ratio"] == pytest.approx(15360 / 1920)
    assert c["verdict"] == "refutes C"  # the whole interval (8x, every seed alike) above 4


def test_controls_b_and_a2_read_the_group_winners_and_batch_augmentation(tmp_path):
    # Control B: e = 4's reduction over the re-tuned baseline, each variant's tuning
    # group winner being the one cell with final seeds (the others hold tuning runs only);
    # refutes B when the interval lies wholly above 4. A2: batch augmentation (128 fresh
    # a step) against the batch-128 baseline of network-r5; supports A when above 1.
    held_at = lambda i, n: [0.85] * i + [0.905] * (n - i)  # noqa: E731
    assert controls.retune_section(str(tmp_path)) is None  # nothing has run
    # Tuning runs only: the losing members and the unfinished cells have no seeds.
    (tmp_path / "retune" / "cells" / "baseline" / "tune" / "lr-0.05" / "seed-101").mkdir(parents=True)
    write_cell(tmp_path, "network-r5", "baseline", [held_at(6, 10)] * 10, 128)
    # Seeds 1-5 of the winners: read as partial (seeds 1-5) while 6-10 run.
    write_cell(tmp_path, "retune", "baseline-wd1e-3", [held_at(6, 10)] * 5, 128)
    write_cell(tmp_path, "retune", "before_aug-e4-sb1000", [held_at(4, 10)] * 5, 32)
    b = controls.retune_section(str(tmp_path))["B"]
    assert b["seeds"] == [1, 2, 3, 4, 5]
    assert b["baseline_cell"] == "baseline-wd1e-3" and b["e4_cell"] == "before_aug-e4-sb1000"
    # Held from the 7th evaluation (step 140) and the 5th (step 100).
    assert b["figures"]["fresh_reduction"]["ratio"] == pytest.approx(140 * 128 / (100 * 32))
    assert b["verdict"] == "refutes B"
    # All 10 seeds, e = 4 now holding later: 5.6x becomes 140 x 128 / (200 x 32) = 2.8x.
    for cell in ("baseline-wd1e-3", "before_aug-e4-sb1000"):
        shutil.rmtree(tmp_path / "retune" / "cells" / cell)
    write_cell(tmp_path, "retune", "baseline-wd1e-3", [held_at(6, 10)] * 10, 128)
    write_cell(tmp_path, "retune", "before_aug-e4-sb1000", [held_at(9, 10)] * 10, 32)
    write_cell(tmp_path, "retune", "batchaug-e2-bs256", [held_at(3, 10)] * 10, 128)
    r = controls.retune_section(str(tmp_path))
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


def test_the_seeds_of_two_machines_read_pooled_and_per_machine(tmp_path):
    # The baseline and e = 5 on seeds 1-10, e = 4 on 1-5 only. Every seed holds 90% from
    # the same evaluation (baseline the 7th, step 140; e = 5 the 5th, step 100), so each
    # reading's interval is a point. On seeds 6-10 e = 5's clock runs twice as fast.
    held_at = lambda i, n: [0.85] * i + [0.905] * (n - i)  # noqa: E731
    exp = tmp_path / "network-r5"
    write_cell(tmp_path, "network-r5", "baseline", [held_at(6, 10)] * 5, 128)
    write_cell(tmp_path, "network-r5", "before_aug-e5-sb1000", [held_at(4, 10)] * 5, 128 // 5)
    _set_machine(tmp_path, "network-r5", "baseline", range(1, 6), 4.8, 1.0)
    _set_machine(tmp_path, "network-r5", "before_aug-e5-sb1000", range(1, 6), 5.3, 1.0)
    runs = readings.load_all_seeds(str(exp))
    assert readings.seeds_text(runs["baseline"]) == "1-5"
    assert network.machines_section(runs, "before_aug-e5-sb1000") is None  # one machine only
    for cell, per_step, at, r, scale in (("baseline", 128, 6, 6.0, 1.0),
                                          ("before_aug-e5-sb1000", 128 // 5, 4, 6.5, 0.5)):
        write_cell(tmp_path, "network-r5", cell, [held_at(at, 10)] * 5, per_step, first_seed=6)
        _set_machine(tmp_path, "network-r5", cell, range(6, 11), r, scale)
    write_cell(tmp_path, "network-r5", "before_aug-e4-sb1000", [held_at(5, 10)] * 5, 32)
    runs = readings.load_all_seeds(str(exp))
    assert [r["seed"] for r in runs["baseline"]] == list(range(1, 11))
    assert readings.seeds_text(runs["before_aug-e4-sb1000"]) == "1-5"
    m = network.machines_section(runs, "before_aug-e5-sb1000")
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


def held_at(i, n):
    """n accuracies: below the target for i evaluations, then holding 90.5%."""
    return [0.85] * i + [0.905] * (n - i)


def network_fixture(root, cells_at, late=False):
    """network-r5 and the sweep in small: every cell on seeds 1-5, holding 90.5% from the
    evaluation cells_at gives it (evaluations every 20 steps), with the summaries'
    figures the network tables read."""
    for exp in ("network-r5", "sweep"):
        for cell, (at, per_step) in cells_at.items():
            write_cell(root, exp, cell, [held_at(at, 12)] * 5, per_step)
            for seed in range(1, 6):
                p = Path(root) / exp / "cells" / cell / f"seed-{seed}" / "summary.json"
                s = json.loads(p.read_text())
                s.update(r_estimate=4.5, compute_seconds=24.0, test_accuracy=0.9)
                p.write_text(json.dumps(s))
        (Path(root) / exp / "results.json").write_text(json.dumps({"cells": []}))
    (Path(root) / "network-r5" / "calibration.txt").write_text("rate: 172271\nR: 4.65\nfactor: 5\n")


CELLS = {"baseline": (6, 128), "before_aug-e2-sb1000": (5, 64), "before_aug-e4-sb1000": (4, 32),
         "before_aug-e5-sb1000": (4, 25), "adaptive-m6-sb1000": (5, 40)}


def test_the_tables_of_a_small_fixture(tmp_path, capsys):
    network_fixture(tmp_path, CELLS)
    # The runner's own table says e = 4's reduction at 90% first touch is 5.6x: checked.
    base_fresh, e4_fresh = 7 * 20 * 128, 5 * 20 * 32
    (tmp_path / "network-r5" / "results.json").write_text(json.dumps({"cells": [
        {"cell": "before_aug-e4-sb1000", "estimates": {
            "fresh_reduction": {"ratio": base_fresh / e4_fresh, "ci95": [5.6, 5.6], "censored": False}}}]}))
    assert targets.main(["--root", str(tmp_path), "--no-plots"]) == 0
    out = tmp_path / "targets"
    table = (out / "table.txt").read_text().splitlines()
    assert table[3] == "baseline's best single evaluation: 90.50%"
    assert "== network-r5 == (a-priori cell: before_aug-e5-sb1000)" in table
    assert table[table.index("== network-r5 == (a-priori cell: before_aug-e5-sb1000)") + 1] == (
        "seeds: adaptive-m6-sb1000 1-5, baseline 1-5, before_aug-e2-sb1000 1-5, "
        "before_aug-e4-sb1000 1-5, before_aug-e5-sb1000 1-5")
    # Every run holds 90.5% from its first evaluation there: each interval is a point.
    row = next(x for x in table if x.startswith("90.50   "))
    assert "5.60x [5.60-5.60] 5/5" in row
    assert "  network-r5: 1 figures of the committed table (90%, first touch) recomputed, 0 differ" in table
    assert "  sweep: 0 figures of the committed table (90%, first touch) recomputed, 0 differ" in table
    assert table[-1] == "plots: plots not requested"
    doc = json.loads((out / "targets.json").read_text())
    assert doc["targets"]["network"] == [87.0 + 0.25 * i for i in range(15)]
    e5 = doc["experiments"]["network-r5"]["cells"]["before_aug-e5-sb1000"][-1]["held"]
    assert e5["fresh"] == {"median": 5 * 20 * 25, "ci95": [2500.0, 2500.0], "n": 5, "censored": 0,
                           "median_censored": False}
    assert e5["speedup"] == {"ratio": 140 / 100, "ci95": [1.4, 1.4], "censored": False}
    csv = (out / "targets.csv").read_text().splitlines()
    assert csv[0].startswith("experiment,cell,target,reading,reached,runs,fresh_median")
    assert "network-r5,before_aug-e4-sb1000,90.50,held,5,5,3200,0,5.6,5.6,5.6,0,100,1.4,1.4,1.4,0" in csv
    demo = json.loads((out / "demo_reference.json").read_text())
    assert demo["seeds"] == ("baseline seeds 1-5, before_aug-e5-sb1000 seeds 1-5, "
                             "adaptive-m6-sb1000 seeds 1-5")
    assert capsys.readouterr().out.splitlines() == table


def test_a_committed_figure_that_differs_fails_the_check(tmp_path):
    network_fixture(tmp_path, CELLS)
    (tmp_path / "network-r5" / "results.json").write_text(json.dumps({"cells": [
        {"cell": "before_aug-e4-sb1000", "estimates": {
            "fresh_reduction": {"ratio": 5.5, "ci95": [5.6, 5.6], "censored": False}}}]}))
    assert targets.main(["--root", str(tmp_path), "--no-plots"]) == 1
    table = (tmp_path / "targets" / "table.txt").read_text().splitlines()
    assert "    network-r5 before_aug-e4-sb1000 fresh_reduction: mine 5.60x [5.60-5.60], committed " \
           "5.50x [5.60-5.60]" in table


def test_the_cells_at_their_own_budgets(tmp_path, capsys):
    # Every budget of the baseline, e = 4 and e = 5 on seeds 1-5; the baseline's best is
    # 2,925, e = 4's 3,900 (network-r5's runs: no cell of its own), e = 5's 1,950.
    for cell, per_step, at in (("baseline", 128, {1950: 7, 2925: 5, 3900: 6, 5850: 6}),
                               ("before_aug-e4-sb1000", 32, {1950: 5, 2925: 5, 3900: 3, 5850: 4}),
                               ("before_aug-e5-sb1000", 25, {1950: 2, 2925: 4, 3900: 3, 5850: 4})):
        for S, i in at.items():
            exp, suffix = ("network-r5", "") if S == 3900 else ("controls", f"-s{S}")
            write_cell(tmp_path, exp, cell + suffix, [held_at(i, 10)] * 5, per_step)
            if (cell, S) == ("before_aug-e5-sb1000", 3900):  # e = 5's 5,850 not run yet
                with pytest.raises(SystemExit, match=r'not every cell has a chosen budget yet \({"baseline": '
                                                     r'2925, "e4": 3900, "e5": null}\)'):
                    controls.budget_cells(str(tmp_path))
    with pytest.raises(runfiles.RunFileError, match="absent/controls/cells: no such folder"):
        controls.budget_cells(str(tmp_path / "absent"))
    cells, tuned = controls.budget_cells(str(tmp_path))
    assert cells == [
        {"id": "baseline-s2925", "variant": "baseline", "seeds": list(range(1, 11)),
         "overrides": {"max_steps": 2925}},
        {"id": "before_aug-e5-sb1000-s1950", "variant": "example_before_augmentation", "seeds": list(range(1, 11)),
         "overrides": {"max_steps": 1950}, "factor": 5, "shuffle_after_echo": 1000}]
    assert tuned == {"baseline-s2925": "baseline", "before_aug-e5-sb1000-s1950": "before_aug-e5-sb1000"}
    # The command line run.sh budgets renders budgets.json's @CELLS@ and @MAP@ with.
    assert controls.main(["budget-cells", "--root", str(tmp_path)]) == 0
    line = capsys.readouterr().out
    assert line == ", ".join(json.dumps(c) for c in cells) + "\t" + \
        '"baseline-s2925": "baseline", "before_aug-e5-sb1000-s1950": "before_aug-e5-sb1000"\n'
    # The final runs are on seeds 1-10: network-r5's e = 4 has 1-5 here.
    assert controls.budgets_section(str(tmp_path))["status"] == (
        "final runs to do: network-budgets-r5/baseline-s2925, network-r5/before_aug-e4-sb1000, "
        "network-budgets-r5/before_aug-e5-sb1000-s1950 (seeds 1-10)")
