"""The bandwidth search of the protocol's calibration (experiments/protocol/calibrate.py)
on a synthetic R(bandwidth): it lands within the tolerance, keeps to its bracket, takes
the median of its repeated runs, and says so clearly when the machine is too loaded; its
command line reads the history the shell scripts append to."""

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
