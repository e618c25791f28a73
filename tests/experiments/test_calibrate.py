"""The bandwidth search of the protocol's calibration (experiments/protocol/calibrate.py)
on a synthetic R(bandwidth): it lands within the tolerance, keeps to its bracket, takes
the median of its repeated runs, and says so clearly when the machine is too loaded; its
command line reads the history the shell scripts append to."""

import json
import random
import subprocess
import sys
from pathlib import Path

from experiments.protocol import calibrate

ROOT = Path(__file__).resolve().parents[2]


def search(goal, first_rate, measure, limit=100):
    """Runs the search against `measure(rate) -> R`; returns (verb, values, history)."""
    history = []
    for _ in range(limit):
        verb, *values = calibrate.next_step(goal, history, first_rate)
        if verb != "measure":
            return verb, values, history
        history.append((values[0], measure(values[0])))
    raise AssertionError("the search did not end")


def test_lands_within_the_tolerance_on_a_quiet_machine():
    # R = 2e6 / rate: the goal 5 is at 400,000 bytes/s; the first guess is 3x off.
    verb, (rate, r), history = search(5, 1_200_000, lambda rate: 2e6 / rate)
    assert verb == "done"
    assert abs(r - 5) <= 0.5
    assert abs(rate - 400_000) <= 40_000
    assert len(history) % calibrate.ATTEMPTS == 0  # every bandwidth measured 3 times


def test_the_median_ignores_one_wild_run():
    runs = iter([5.0, 14.8, 5.2])  # one run on a busy machine
    verb, (rate, r), history = search(5, 400_000, lambda rate: next(runs))
    assert (verb, rate, r) == ("done", 400_000, 5.2)


def test_stays_inside_its_bracket_with_noise():
    rng = random.Random(3)
    verb, values, history = search(5, 50_000, lambda rate: 2e6 / rate * rng.uniform(0.9, 1.1))
    assert verb == "done"
    done, _ = calibrate.medians(history)
    rates = list(dict.fromkeys(rate for rate, _ in history))
    for i, rate in enumerate(rates):
        lower_r_high = [x for x in rates[:i] if done[x] > 5]
        upper_r_low = [x for x in rates[:i] if done[x] < 5]
        if lower_r_high:
            assert rate > max(lower_r_high)
        if upper_r_low:
            assert rate < min(upper_r_low)


def test_a_contradiction_says_the_machine_is_too_loaded():
    # A higher bandwidth with a clearly higher R, as seen on a busy machine (196 KB/s gave
    # R 2.2, then 218 KB/s R 4.8).
    answers = {100_000: 20.0, 400_000: 2.2, 200_000: 1.5, 141_421: 12.0}
    verb, values, history = search(5, 100_000, lambda rate: answers[rate])
    assert verb == "fail"
    assert "too loaded" in values[2], values[2]
    assert (values[0], values[1]) == (400_000, 2.2)  # the closest median to the goal


def test_gives_up_after_its_bandwidths_with_the_closest():
    # R barely moves with bandwidth (the step is the bottleneck): never near 5.
    verb, values, history = search(5, 100_000, lambda rate: 1.5 + 1e3 / rate)
    assert verb == "fail"
    assert len({rate for rate, _ in history}) <= calibrate.MAX_RATES
    assert "did not come within" in values[2] or "reached" in values[2]


def next_line(history: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.protocol.calibrate", "next", "5", str(history),
                           "400000"], cwd=ROOT, capture_output=True, text=True)


def test_the_command_line_goes_on_from_its_history(tmp_path):
    history = tmp_path / "calibration_runs.txt"
    history.write_text("")
    assert next_line(history).stdout == "measure 400000\n"
    history.write_text("400000 5.10\n400000 4.90\n")
    assert next_line(history).stdout == "measure 400000\n"  # a third run at the same bandwidth
    history.write_text("400000 5.10\n400000 4.90\n400000 5.20\n")
    assert next_line(history).stdout == "done 400000 5.10\n"
    history.write_text("400000 5.10\n400000 R?\n")
    r = next_line(history)
    assert r.returncode != 0 and f"{history}: line 2: expected 'RATE R'" in r.stderr


def command(*args):
    """python3 -m experiments.protocol.calibrate ARGS..., from the repository's root."""
    return subprocess.run([sys.executable, "-m", "experiments.protocol.calibrate", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True)


def test_the_first_bandwidth_puts_goal_steps_between_batches(tmp_path):
    # 50,000 examples of 500 bytes, a batch of 128 every 0.02 s: 64,000 bytes a batch; at
    # R = 5 a batch may take 0.1 s, 640,000 bytes/s, over 4 connections 160,000 each.
    assert calibrate.first_rate(0.02, 25_000_000, 50_000, 128, 5.0, 4) == 160_000
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"compute_seconds": 4.0, "fresh": 25_600}))  # 200 steps
    assert command("first-rate", summary, 200, 25_000_000, 50_000, 5, 4, 128).stdout == "160000\n"
    # Without a batch size: the fresh examples per step of the calibration run (128 here).
    assert command("first-rate", summary, 200, 25_000_000, 50_000, 5, 4).stdout == "160000\n"
    assert command("rate", 25_000_000, 50_000, 128, 20, 5, 4, "ms").stdout == "160000\n"
    # The step time to 6 significant digits, as the committed calibrations computed it.
    assert calibrate.awk_number(1 / 3) == 0.333333


def test_a_bad_calibration_input_is_refused_with_what_is_wrong(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"fresh": 100}))
    r = command("first-rate", summary, 200, 1000, 10, 5, 4)
    assert r.returncode == 1 and str(summary) in r.stderr and "compute_seconds" in r.stderr
    r = command("rate", 1000, 0, 128, 0.02, 5, 4)
    assert r.returncode == 1 and "must be positive" in r.stderr
    assert command("factor").returncode == 2  # the usage


def test_the_factor_the_band_and_the_proportional_step():
    assert [calibrate.apriori_factor(r) for r in (1.2, 2.49, 2.5, 4.65, 6.6)] == [2, 2, 3, 5, 7]
    assert calibrate.apriori_factor(2.49, least=3, plus=1) == 3
    assert command("factor", 4.65).stdout == "5\n" and command("factor", 5.6, 3, 1).stdout == "7\n"
    assert command("within", 4.1, 5).returncode == 0 and command("within", 3.9, 5).returncode == 1
    assert command("within", 6.3, 5).returncode == 1
    assert command("adjust", 172_271, 5.8, 5).stdout == "199834\n"
    assert command("r", 5.3449999).stdout == "5.34\n" and command("percent", 0.89).stdout == "89\n"
