"""The readers of the run files (experiments/runfiles.py): what they return, the errors
that name the file, the record and what is wrong, the command line the shell scripts
call, and every committed run file of results/ read without an error."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import archive, runfiles
from experiments.runfiles import RunFileError

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.runfiles", *args], cwd=ROOT,
                          input=stdin, capture_output=True, text=True)


def test_a_summary_with_its_fields(tmp_path):
    p = write(tmp_path / "summary.json", '{"fresh": 499200, "wall_seconds": 812.5, "note": "x"}')
    assert runfiles.read_json(p, ("fresh", "wall_seconds")) == {"fresh": 499200, "wall_seconds": 812.5, "note": "x"}


@pytest.mark.parametrize("text, fields, message", [
    ('{"fresh": 1,\n "steps": }', (), "summary.json: line 2 column 11: not JSON: Expecting value"),
    ('[1, 2]', (), "summary.json: expected a JSON object, got list"),
    ('{"fresh": 1}', ("fresh", "steps", "wall_seconds"), "summary.json: no 'steps', 'wall_seconds' (it has fresh)"),
    ('{"fresh": "many"}', ("fresh",), "summary.json: 'fresh' is \"many\", expected a number"),
    ('{"fresh": true}', ("fresh",), "summary.json: 'fresh' is true, expected a number"),
    ('{"fresh": null}', ("fresh",), "summary.json: 'fresh' is null, expected a number"),
])
def test_a_bad_summary_is_named_with_what_is_wrong(tmp_path, text, fields, message):
    p = write(tmp_path / "summary.json", text)
    with pytest.raises(RunFileError) as e:
        runfiles.read_json(p, fields)
    assert str(e.value) == f"{tmp_path}/{message}"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(RunFileError, match=rf"^{tmp_path}/nope.json: no such file$"):
        runfiles.read_json(str(tmp_path / "nope.json"))


def test_evaluations_one_a_line_blank_lines_skipped(tmp_path):
    p = write(tmp_path / "evals.jsonl", '{"step": 20, "accuracy": 0.5}\n\n{"step": 40, "accuracy": 0.6}\n')
    assert runfiles.read_evals(p, ("step", "accuracy")) == [{"step": 20, "accuracy": 0.5},
                                                            {"step": 40, "accuracy": 0.6}]


@pytest.mark.parametrize("text, message", [
    ('{"step": 20, "accuracy": 0.5}\n{"step": 40, "accuracy": 0.6\n', "line 2: not JSON"),
    ('{"step": 20, "accuracy": 0.5}\n{"step": 40}\n', "line 2: no 'accuracy' (it has step)"),
    ('{"step": 20, "accuracy": 0.5}\n[]\n', "line 2: expected a JSON object, got list"),
    ('{"step": 40, "accuracy": 0.5}\n{"step": 40, "accuracy": 0.6}\n',
     "line 2: step 40 after step 40: the steps must increase"),
])
def test_a_bad_evaluation_is_named_by_its_line(tmp_path, text, message):
    p = write(tmp_path / "evals.jsonl", text)
    with pytest.raises(RunFileError) as e:
        runfiles.read_evals(p, ("step", "accuracy"))
    assert str(e.value).startswith(f"{p}: {message}")


def test_calibration_key_value_lines(tmp_path):
    p = write(tmp_path / "calibration.txt", "rate: 172271\nR: 4.65\n\nmachine: 2 CPUs, load 0.8: busy\n"
                                            "cpu split: 1\n")
    assert runfiles.read_calibration(p) == {"rate": "172271", "R": "4.65", "machine": "2 CPUs, load 0.8: busy",
                                            "cpu split": "1"}


@pytest.mark.parametrize("text, message", [
    ("rate: 1\nR 4.65\n", "line 2: expected 'key: value', got 'R 4.65'"),
    ("rate: 1\n: 4.65\n", "line 2: expected 'key: value', got ': 4.65'"),
    ("rate: 1\nR: 2\nrate: 3\n", "line 3: 'rate' again (line 1 has it)"),
])
def test_a_bad_calibration_line_is_named(tmp_path, text, message):
    p = write(tmp_path / "calibration.txt", text)
    with pytest.raises(RunFileError) as e:
        runfiles.read_calibration(p)
    assert str(e.value) == f"{p}: {message}"


def test_calibration_runs(tmp_path):
    p = write(tmp_path / "calibration_runs.txt", "172271 4.65\n\n200000 3.9\n")
    assert runfiles.read_calibration_runs(p) == [(172271, 4.65), (200000, 3.9)]
    p = write(tmp_path / "bad.txt", "172271 4.65\n200000.5 3.9\n")
    with pytest.raises(RunFileError, match=r"bad.txt: line 2: expected 'RATE R' .*got '200000.5 3.9'"):
        runfiles.read_calibration_runs(p)


def make_run(root: Path, cell: str, seed: int, fresh: int = 100) -> None:
    d = root / "cells" / cell / f"seed-{seed}"
    write(d / "summary.json", json.dumps({"fresh": fresh}))
    write(d / "evals.jsonl", json.dumps({"step": 20, "accuracy": 0.5}) + "\n")


def test_cells_with_every_seed_asked_for(tmp_path):
    for s in (1, 2, 3):
        make_run(tmp_path, "baseline", s, fresh=100 * s)
    make_run(tmp_path, "e4", 1)
    make_run(tmp_path, "e4", 3)  # seed 2 missing
    (tmp_path / "cells" / "e4" / "seed-2").mkdir()  # begun, not finished
    cells = runfiles.load_cells(str(tmp_path), [1, 2, 3], summary_fields=("fresh",))
    assert list(cells) == ["baseline"]
    assert [(r["seed"], r["summary"]["fresh"]) for r in cells["baseline"]] == [(1, 100), (2, 200), (3, 300)]
    every = runfiles.load_all_seeds(str(tmp_path))
    assert {c: [r["seed"] for r in runs] for c, runs in every.items()} == {"baseline": [1, 2, 3], "e4": [1, 3]}
    assert list(runfiles.load_cells(str(tmp_path), [1], only="e4")) == ["e4"]
    assert runfiles.load_cells(str(tmp_path), [1], only="absent") == {}
    with pytest.raises(RunFileError, match=r"absent/cells: no such folder: the experiment has no runs here"):
        runfiles.load_all_seeds(str(tmp_path / "absent"))


def test_a_bad_run_is_named_by_its_file(tmp_path):
    make_run(tmp_path, "baseline", 1)
    write(tmp_path / "cells" / "baseline" / "seed-2" / "summary.json", "{}")
    write(tmp_path / "cells" / "baseline" / "seed-2" / "evals.jsonl", "")
    with pytest.raises(RunFileError, match=r"baseline/seed-2/summary.json: no 'fresh' \(it has \)"):
        runfiles.load_all_seeds(str(tmp_path), summary_fields=("fresh",))
    write(tmp_path / "cells" / "e4" / "seed-x" / "summary.json", "{}")
    with pytest.raises(RunFileError, match=r"cells/e4/seed-x: a run folder is named seed-N"):
        runfiles.load_all_seeds(str(tmp_path))


def test_value_at_a_dotted_key(tmp_path):
    doc = {"overrides": {"max_steps": 2600, "optimizer": {"decay_steps": 3900}}}
    assert runfiles.value_at(doc, "overrides.optimizer.decay_steps", "demo.json") == 3900
    with pytest.raises(RunFileError, match=r"^demo.json: no 'overrides.optimizer.lr': overrides.optimizer has "
                                           r"no 'lr' \(it has decay_steps\)$"):
        runfiles.value_at(doc, "overrides.optimizer.lr", "demo.json")
    with pytest.raises(RunFileError, match=r"the top level has no 'grid'"):
        runfiles.value_at(doc, "grid", "demo.json")


def test_the_command_line(tmp_path):
    p = write(tmp_path / "demo.json", json.dumps({"overrides": {"max_steps": 2600, "target_accuracy": 0.89},
                                                  "name": "demo", "print": ["a", "b"]}))
    assert cli("value", p, "overrides.max_steps").stdout == "2600\n"
    assert cli("value", p, "overrides.target_accuracy").stdout == "0.89\n"
    assert cli("value", p, "name").stdout == "demo\n"
    assert cli("value", p, "print").stdout == "a\nb\n"
    assert cli("value", p, "absent", "7").stdout == "7\n"
    r = cli("value", p, "absent")
    assert r.returncode == 1 and r.stderr == f"runfiles: {p}: no 'absent': the top level has no 'absent' " \
                                             "(it has name, overrides, print)\n"
    cal = write(tmp_path / "calibration.txt", "rate: 172271\nfactor: 5\n")
    assert cli("calibration", cal, "factor").stdout == "5\n"
    assert cli("calibration", cal, "cpu split", "0").stdout == "0\n"
    r = cli("calibration", cal, "cpu split")
    assert r.returncode == 1 and "no 'cpu split' (it has rate, factor)" in r.stderr
    report = json.dumps({"cells": [{"cell": "baseline", "lr": 0.05}, {"cell": "e4", "lr": None}]})
    assert cli("lr", "-", "baseline", stdin=report).stdout == "0.05\n"
    assert cli("lr", "-", "e4", stdin=report).stdout == ""  # not chosen yet
    assert cli("lr", "-", "absent", stdin=report).stdout == ""
    r = cli("lr", "-", "baseline", stdin="{}")
    assert r.returncode == 1 and "standard input: no 'cells' list" in r.stderr
    assert cli("nonsense").returncode == 2


def committed(pattern: str):
    return sorted(str(p) for p in (ROOT / "results").glob(pattern))


@pytest.mark.skipif(not committed("protocol/*/calibration.txt"), reason="no committed run files")
def test_every_committed_run_file_reads(tmp_path):
    for p in committed("**/calibration.txt") + committed("**/*_calibration.txt"):
        assert runfiles.read_calibration(p)
    for p in committed("**/calibration_runs.txt"):
        assert runfiles.read_calibration_runs(p)
    # Each experiment's runs, from its archive (experiments/archive.py).
    archives = committed("*/*/runs.jsonl.xz") + committed("*/runs.jsonl.xz")
    assert archives
    runs = 0
    for i, a in enumerate(archives):
        out = tmp_path / str(i)
        archive.unpack(os.path.dirname(a), out)
        for p in sorted(out.glob("**/seed-*/summary.json")):
            runfiles.read_json(str(p), ("fresh", "steps"))
            if (p.parent / "evals.jsonl").exists():
                runfiles.read_evals(str(p.parent / "evals.jsonl"), ("step",))
            runs += 1
    assert runs > 600  # about 700 runs: every experiment of results/


def test_calibration_written_reads_back(tmp_path):
    path = tmp_path / "calibration.txt"
    runfiles.write_calibration(str(path), "200-step runs, the median of 3", "abc1234",
                               ["172271", "4.65", "5", "http://127.0.0.1:28545", "0.05"],
                               ["cpu split: 1"])
    cal = runfiles.read_calibration(str(path))
    assert list(cal) == ["date", "commit", "machine", "rate", "R", "factor", "url", "baseline lr",
                         "cpu split", "method"]
    assert cal["rate"] == "172271" and cal["cpu split"] == "1" and cal["method"].startswith("200-step")
    assert cal["machine"].split()[1] == "CPUs," and " load " in cal["machine"]
    r = subprocess.run([sys.executable, "-m", "experiments.runfiles", "write-calibration", str(path), "m", "c",
                        "1", "2", "3", "u", "0.1", "no separator"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "extra line 1: expected 'key: value'" in r.stderr
    with pytest.raises(RunFileError, match="takes 5 figures"):
        runfiles.write_calibration(str(path), "m", "c", ["1", "2"])
    with pytest.raises(RunFileError, match="a value of one line"):
        runfiles.write_calibration(str(path), "two\nlines", "c", ["1", "2", "3", "u", "0.1"])
