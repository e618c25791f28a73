"""The echo-or-scale report (experiments/echo_or_scale/report.py): the workers' seconds it
charges from the dispatcher's status log, the cost to target at each price, the best fixed
setting, and its reading of archived settings (unpacked before they are read)."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import archive, runfiles
from experiments.echo_or_scale import report

CELL = report.cell_id(1)
T0 = 1_000_000.0


def launched(index, age, ran=None):
    return [index, f"deos-w{index + 1}", "running" if ran is None else "exited", age, ran, f"w{index + 1}"]


def write_status(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def write_run(setting_dir, seed, reach_s, workers, cell=CELL):
    """One run: an evaluation every 10 s, 0.95 accuracy from reach_s on (so T = reach_s),
    and `workers` workers launched 5 s before the trainer, running to its end."""
    d = setting_dir / "cells" / cell / f"seed-{seed}"
    d.mkdir(parents=True)
    evals = [{"step": int(t), "fresh": int(t) * 100, "accuracy": 0.95 if t >= reach_s else 0.5,
              "wall_seconds": float(t)} for t in range(10, 301, 10)]
    d.joinpath("evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    d.joinpath("summary.json").write_text(json.dumps({"fresh": 30000, "wall_seconds": 301.0, "steps": 300,
                                                      "final_accuracy": 0.95, "r_estimate": 2.0}))
    d.joinpath("result.json").write_text("{}")
    s = setting_dir / "service" / cell / f"seed-{seed}"
    s.mkdir(parents=True)
    s.joinpath("times.json").write_text(json.dumps({"trainer_start": T0, "trainer_end": T0 + 301}))
    write_status(s / "status.jsonl", [{"t": T0 + 1, "launched": [launched(k, 6.0) for k in range(workers)]}])


def test_launches_span_a_worker_from_its_launch_to_its_exit_or_the_run_end(tmp_path):
    f = tmp_path / "status.jsonl"
    write_status(f, [{"t": 100.0, "launched": [launched(0, 10.0)]},
                     {"t": 150.0, "launched": [launched(0, 60.0), launched(1, 5.0)]},
                     {"t": 200.0, "launched": [launched(0, 110.0, ran=80.0), launched(1, 55.0)]}])
    spans = sorted(report.read_status(str(f), end=300.0)[0])
    assert spans == [(90.0, 170.0), (145.0, 300.0)]
    # Only the seconds inside the window count.
    assert report.worker_seconds(spans, 100.0, 200.0) == pytest.approx(70.0 + 55.0)


def test_a_status_line_that_is_not_a_record_is_named(tmp_path):
    f = tmp_path / "status.jsonl"
    f.write_text('{"t": 1, "launched": []}\n{"t": 2}\n')
    with pytest.raises(runfiles.RunFileError, match=r"status.jsonl: line 2: not a status record"):
        report.read_status(str(f), end=3.0)


def test_cost_charges_the_workers_at_their_price_and_picks_the_cheapest_setting(tmp_path):
    for seed, t in ((1, 200), (2, 220), (3, 210)):
        write_run(tmp_path / "grid-n1", seed, t, workers=1)
    for seed, t in ((1, 100), (2, 120), (3, 110)):
        write_run(tmp_path / "grid-n2", seed, t, workers=2)
    obs = report.settings(str(tmp_path), "first_touch")
    assert sorted(obs) == ["n1-e1", "n2-e1"]
    one = {o["seed"]: o for o in obs["n1-e1"]}
    assert one[2]["T"] == 220 and one[2]["worker_seconds"] == pytest.approx(220.0)
    assert {o["seed"]: o["mean_workers"] for o in obs["n2-e1"]} == pytest.approx({1: 2.0, 2: 2.0, 3: 2.0})
    # Workers free: time alone, 2 workers sooner. A worker 4x a trainer: n1 costs 5 T =
    # 17.5 minutes against n2's 9 T = 16.5.
    free, dear = report.price_table(obs, 0), report.price_table(obs, 4)
    assert free["rows"]["n1-e1"]["cost"]["median"] == pytest.approx(210 / 60)
    assert free["best_fixed"] == "n2-e1"
    assert dear["rows"]["n1-e1"]["cost"]["median"] == pytest.approx(5 * 210 / 60)
    assert dear["rows"]["n2-e1"]["cost"]["median"] == pytest.approx(9 * 110 / 60)
    assert dear["best_fixed"] == "n2-e1"


def test_a_run_that_never_reaches_the_target_counts_censored_at_its_whole_run(tmp_path):
    write_run(tmp_path / "grid-n1", 1, 10_000, workers=1)  # never at 0.95
    (o,) = report.settings(str(tmp_path), "first_touch")["n1-e1"]
    assert o["censored"] and o["T"] == pytest.approx(301.0)  # the summary's wall_seconds


def test_archived_settings_are_unpacked_and_read(tmp_path):
    for seed, t in ((1, 200), (2, 220)):
        write_run(tmp_path / "grid-n1", seed, t, workers=1)
    before = report.settings(str(tmp_path), "held")
    setting = tmp_path / "grid-n1"
    files = {p.relative_to(setting).as_posix(): p.read_bytes() for p in setting.rglob("*") if p.is_file()}
    archive.write(setting, files)
    shutil.rmtree(setting / "cells")
    shutil.rmtree(setting / "service")
    # The report's entry unpacks them (once, for both readings) before it reads them.
    assert report.main(["report", str(tmp_path), "--no-plots"]) == 0
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["held"]["runs"] == json.loads(json.dumps(before))
    assert (setting / "cells" / CELL / "seed-2" / "evals.jsonl").is_file()


def test_a_policy_runs_workers_and_echo_cap_over_time_are_reported_and_plotted(tmp_path):
    """Section 4's 'beside each': the dispatcher's target over time, the policy's decisions
    and its echo cap, in the table and in the plots' data."""
    setting = tmp_path / "echo-or-scale-p1"
    write_run(setting, 1, 200, workers=1, cell=report.ADAPTIVE_CELL)
    run_dir = setting / "cells" / report.ADAPTIVE_CELL / "seed-1"
    summary = json.loads((run_dir / "summary.json").read_text())
    line = "echo-or-scale 12.0 s: workers 1 -> 3, echo cap 1 -> 2 (factor - -> 2, D 1,200/s)"
    summary["pipeline_scale"] = {"policy": "echo_or_scale", "decisions": [line]}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    write_status(setting / "service" / report.ADAPTIVE_CELL / "seed-1" / "status.jsonl",
                 [{"t": T0 + 1, "target": 1, "launched": [launched(0, 6.0)]},
                  {"t": T0 + 2, "target": 1, "launched": [launched(0, 7.0)]},
                  {"t": T0 + 50, "target": 3, "launched": [launched(0, 55.0), launched(1, 0.5), launched(2, 0.5)]}])
    (o,) = report.settings(str(tmp_path), "first_touch")["echo-or-scale-p1"]
    assert o["targets"] == [[1.0, 1], [50.0, 3]]
    assert o["decisions"] == [line] and report.echo_caps(o["decisions"]) == [(12.0, 2)]
    # 1 worker from the start, 2 more from 49.5 s, to T = 200 s.
    assert o["worker_seconds"] == pytest.approx(200 + 2 * 150.5)

    assert report.main(["report", str(tmp_path), "--no-plots"]) == 0
    table = (tmp_path / "table.txt").read_text()
    assert "seed 1: T 200 s, workers 1 at 1 s -> 3 at 50 s, 3 launched" in table
    assert "    " + line in table
    plot = (tmp_path / "plots" / "workers_echo-or-scale-p1.dat").read_text()
    assert plot == ("# seed 1: workers\n1.0 1\n50.0 3\n200.0 3\n\n\n"
                    "# seed 1: echo cap\n12.0 2\n200.0 2\n\n\n")
    assert "workers_echo-or-scale-p1" in (tmp_path / "plots" / "plots.gp").read_text()


def test_each_codes_echo_or_scale_is_compared_with_its_own_codes_policies(tmp_path):
    """The registered code's policies and those run again on the corrected code (protocol
    change 3, settings "...-c3") are reported side by side; each echo or scale's ratios are
    over the grid's best and over its own code's single-lever policies."""
    for seed, t in ((1, 200), (2, 220), (3, 210)):
        write_run(tmp_path / "grid-n1", seed, t, workers=1)
        write_run(tmp_path / "workers-only", seed, 300, workers=1)
        write_run(tmp_path / "workers-only-c3", seed, 250, workers=1)
        write_run(tmp_path / "echo-or-scale-p0", seed, 280, workers=1, cell=report.ADAPTIVE_CELL)
        write_run(tmp_path / "echo-or-scale-p0-c3", seed, 200, workers=1, cell=report.ADAPTIVE_CELL)
        write_run(tmp_path / "echo-or-scale-p1-c3", seed, 100, workers=1, cell=report.ADAPTIVE_CELL)
    obs = report.settings(str(tmp_path), "first_touch")
    free = report.price_table(obs, 0)
    assert sorted(free["rows"]) == ["echo-or-scale-p0", "echo-or-scale-p0-c3", "n1-e1", "workers-only",
                                    "workers-only-c3"]  # another price's echo or scale is left out
    assert free["eos_over_best"]["ratio"] == pytest.approx(280 / 210)
    assert free["eos-c3_over_best"]["ratio"] == pytest.approx(200 / 210)
    assert free["eos_over_workers-only"]["ratio"] == pytest.approx(280 / 300)
    assert free["eos-c3_over_workers-only"]["ratio"] == pytest.approx(200 / 250)
    assert report.main(["report", str(tmp_path), "--no-plots"]) == 0
    table = (tmp_path / "table.txt").read_text()
    assert "echo or scale over workers only (registered code): 0.93" in table
    assert "echo or scale over workers only (change 3): 0.80" in table
