"""The bandwidth search of experiments/protocol/run.sh's calibration.

R (the pipeline's time per batch over the train step's, measured in a short baseline
training run over the throttled shards) falls as the bandwidth rises. One measurement
is noisy on a busy machine: the same bandwidth has given R 14.8 and 12.6, and a higher
one a higher R. So the search:
  - measures each bandwidth several times (ATTEMPTS) and uses the median;
  - keeps a bracket: the highest bandwidth whose R was above the goal's band and the
    lowest whose R was below it, and never leaves it (a monotonic search); inside it,
    the next bandwidth is the geometric midpoint, outside a bracket the step that a
    proportional model (R ~ 1 / bandwidth) predicts;
  - stops when a median lands within TOLERANCE of the goal, and gives up with a clear
    message when the medians contradict each other (a higher bandwidth with a clearly
    higher R: the machine is too loaded to calibrate) or after MAX_RATES bandwidths.

run.sh appends "RATE R" lines to a history file (calibration_runs.txt), one per
measurement, and asks
  python3 -m experiments.protocol.calibrate next GOAL HISTORY FIRST_RATE
which prints one line: "measure RATE" (measure RATE again or for the first time),
"done RATE R" (the median R at RATE is within the tolerance) or "fail RATE R MESSAGE"
(no bandwidth qualifies; RATE and R are the closest median, MESSAGE says why).

The calibration's arithmetic, for the shell scripts that start the servers:
  python3 -m experiments.protocol.calibrate first-rate SUMMARY STEPS BYTES EXAMPLES GOAL CONNECTIONS [PER_STEP]
      the first bandwidth to try, in bytes/s per connection: the bandwidth at which one
      train step's examples (PER_STEP, or the fresh examples per step of the unthrottled
      run whose summary.json is SUMMARY) take GOAL train steps to arrive, the step's time
      being SUMMARY's compute_seconds over STEPS, each example BYTES / EXAMPLES bytes.
  python3 -m experiments.protocol.calibrate rate BYTES EXAMPLES PER_STEP STEP GOAL CONNECTIONS [ms]
      the same bandwidth from figures already at hand (a step of STEP seconds, or
      milliseconds with ``ms``).
  python3 -m experiments.protocol.calibrate within R GOAL
      exits 0 when a measured R lies in (0.8 GOAL, 1.25 GOAL), 1 otherwise.
  python3 -m experiments.protocol.calibrate adjust RATE R GOAL
      the bandwidth that a proportional model (R ~ 1 / bandwidth) predicts gives GOAL.
  python3 -m experiments.protocol.calibrate factor R [MIN [PLUS]]
      the a-priori echo factor: round(R) (halves up) plus PLUS (default 0), at least MIN
      (default 2).
  python3 -m experiments.protocol.calibrate r VALUE
      an R to the 2 decimals a measurement supports.
  python3 -m experiments.protocol.calibrate percent FRACTION
      a target accuracy (0.89) as a percentage (89), as the demo's notes print it.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .. import stats
from ..runfiles import RunFileError, read_calibration_runs, read_json

History = Sequence[Tuple[int, float]]
Step = Tuple[Union[str, int, float], ...]

# The demo's smoke mode (scripts/demo.sh --smoke) measures once and takes what it gets:
# CALIBRATE_ATTEMPTS=1 CALIBRATE_TOLERANCE=100.
ATTEMPTS = int(os.environ.get("CALIBRATE_ATTEMPTS", "3"))
TOLERANCE = float(os.environ.get("CALIBRATE_TOLERANCE", "0.10"))
MAX_RATES = 6
# A higher bandwidth whose median R is above a lower bandwidth's by more than this
# share contradicts R's fall with bandwidth: the measurements are noise.
CONTRADICTION = 0.15


def medians(history: History) -> Tuple[Dict[int, float], Optional[int]]:
    """{rate: median R} over the rates with ATTEMPTS measurements, and the rate in progress."""
    by_rate: Dict[int, List[float]] = {}
    order: List[int] = []
    for rate, r in history:
        if rate not in by_rate:
            by_rate[rate] = []
            order.append(rate)
        by_rate[rate].append(r)
    done = {rate: stats.median(rs) for rate, rs in by_rate.items() if len(rs) >= ATTEMPTS}
    pending = [rate for rate in order if len(by_rate[rate]) < ATTEMPTS]
    return done, (pending[-1] if pending else None)


def next_step(goal: float, history: History, first_rate: int) -> Step:
    """What to do next: ("measure", rate), ("done", rate, r) or ("fail", rate, r, message)."""
    done, pending = medians(history)
    if pending is not None:
        return ("measure", pending)
    if not done:
        return ("measure", first_rate)
    rates = sorted(done)
    best = min(done, key=lambda rate: abs(done[rate] - goal))
    for lo, hi in zip(rates, rates[1:]):
        if done[hi] > done[lo] * (1 + CONTRADICTION):
            return ("fail", best, done[best], f"the machine is too loaded to calibrate: {hi} bytes/s gave a median R of "
                            f"{done[hi]:.2f}, above the {done[lo]:.2f} of the lower {lo} bytes/s "
                            f"({ATTEMPTS} runs each); run the demo on a quieter machine")
    last = history[-1][0]
    if abs(done[last] - goal) <= TOLERANCE * goal:
        return ("done", last, done[last])
    if len(done) >= MAX_RATES:
        return ("fail", best, done[best], f"R did not come within {TOLERANCE:.0%} of {goal} at {len(done)} bandwidths "
                        f"(closest: {best} bytes/s, R {done[best]:.2f})")
    too_slow = [rate for rate in rates if done[rate] > goal]  # R too high: more bandwidth
    too_fast = [rate for rate in rates if done[rate] < goal]
    if too_slow and too_fast:
        nxt = int((max(too_slow) * min(too_fast)) ** 0.5)
    else:
        nxt = int(last * done[last] / goal)  # R ~ 1 / bandwidth
    if nxt in done:
        return ("fail", best, done[best], f"the search reached {nxt} bytes/s again (R {done[nxt]:.2f}); the goal "
                        f"{goal} lies between measurable bandwidths")
    return ("measure", nxt)


def awk_number(x: float) -> float:
    """x to 6 significant digits, as the calibrations recorded so far computed it (in awk),
    so that the same measurement gives the same first bandwidth."""
    return float(f"{x:.6g}")


def first_rate(step_seconds: float, bytes_total: int, examples: int, per_step: float, goal: float,
               connections: int) -> int:
    """Bytes/s per connection at which a step's examples take `goal` steps to arrive."""
    if min(step_seconds, examples, per_step, goal, connections) <= 0:
        raise ValueError(f"first-rate: every quantity must be positive (step {step_seconds} s, "
                         f"{examples} examples, {per_step} per step, goal {goal}, {connections} connections)")
    return int(bytes_total / examples * per_step / (goal * step_seconds) / connections)


def apriori_factor(r: float, least: int = 2, plus: int = 0) -> int:
    """round(R) with halves up, plus `plus`, at least `least`."""
    return max(int(r + 0.5) + plus, least)


def _first_rate_command(args: Sequence[str]) -> int:
    """first-rate SUMMARY STEPS BYTES EXAMPLES GOAL CONNECTIONS [PER_STEP]."""
    summary = read_json(args[0], ("compute_seconds", "fresh"))
    steps = int(args[1])
    step_s = awk_number(float(summary["compute_seconds"]) / steps)
    per_step = float(args[6]) if len(args) == 7 else awk_number(float(summary["fresh"]) / steps)
    print(first_rate(step_s, int(args[2]), int(args[3]), per_step, float(args[4]), int(args[5])))
    return 0


def main(argv: Sequence[str]) -> int:
    """The command line (the module's docstring): prints the next step, or a figure of
    the calibration's arithmetic."""
    verb, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    try:
        if verb == "first-rate" and len(args) in (6, 7):
            return _first_rate_command(args)
        if verb == "rate" and (len(args) == 6 or (len(args) == 7 and args[6] == "ms")):
            step_s = float(args[3]) / (1000 if len(args) == 7 else 1)
            print(first_rate(step_s, int(args[0]), int(args[1]), float(args[2]), float(args[4]), int(args[5])))
            return 0
        if verb == "within" and len(args) == 2:
            r, goal = float(args[0]), float(args[1])
            return 0 if 0.8 * goal < r < 1.25 * goal else 1
        if verb == "adjust" and len(args) == 3:
            print(int(int(args[0]) * float(args[1]) / float(args[2])))
            return 0
        if verb == "factor" and 1 <= len(args) <= 3:
            print(apriori_factor(float(args[0]), *[int(a) for a in args[1:]]))
            return 0
        if verb == "percent" and len(args) == 1:
            print(f"{float(args[0]) * 100:g}")
            return 0
        if verb == "r" and len(args) == 1:
            print(f"{float(args[0]):.2f}")
            return 0
    except (RunFileError, ValueError) as e:
        print(f"calibrate: {e}", file=sys.stderr)
        return 1
    if len(argv) != 5 or argv[1] != "next":
        print(__doc__, file=sys.stderr)
        return 2
    goal, first = float(argv[2]), int(argv[4])
    try:
        history = read_calibration_runs(argv[3])
    except RunFileError as e:
        print(f"calibrate: {e}", file=sys.stderr)
        return 1
    step, *values = next_step(goal, history, first)
    print(step, *[f"{v:.2f}" if isinstance(v, float) else v for v in values])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
