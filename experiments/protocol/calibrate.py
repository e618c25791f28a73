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
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .. import stats
from ..runfiles import RunFileError, read_calibration_runs

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


def main(argv: Sequence[str]) -> int:
    """The command line (the module's docstring): prints the next step."""
    if len(argv) != 5 or argv[1] != "next":
        print(__doc__, file=sys.stderr)
        return 2
    goal, first_rate = float(argv[2]), int(argv[4])
    try:
        history = read_calibration_runs(argv[3])
    except RunFileError as e:
        print(f"calibrate: {e}", file=sys.stderr)
        return 1
    verb, *values = next_step(goal, history, first_rate)
    print(verb, *[f"{v:.2f}" if isinstance(v, float) else v for v in values])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
