#!/usr/bin/python3
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

run.sh appends "RATE R" lines to a history file, one per measurement, and asks
  calibrate.py next GOAL HISTORY FIRST_RATE
which prints one line: "measure RATE" (measure RATE again or for the first time),
"done RATE R" (the median R at RATE is within the tolerance) or "fail RATE R MESSAGE"
(no bandwidth qualifies; RATE and R are the closest median, MESSAGE says why).
"""
import os
import statistics
import sys

# The demo's smoke mode (scripts/demo.sh --smoke) measures once and takes what it gets:
# CALIBRATE_ATTEMPTS=1 CALIBRATE_TOLERANCE=100.
ATTEMPTS = int(os.environ.get("CALIBRATE_ATTEMPTS", "3"))
TOLERANCE = float(os.environ.get("CALIBRATE_TOLERANCE", "0.10"))
MAX_RATES = 6
# A higher bandwidth whose median R is above a lower bandwidth's by more than this
# share contradicts R's fall with bandwidth: the measurements are noise.
CONTRADICTION = 0.15


def medians(history):
    """{rate: median R} over the rates with ATTEMPTS measurements, and the rate in progress."""
    by_rate, order = {}, []
    for rate, r in history:
        if rate not in by_rate:
            by_rate[rate] = []
            order.append(rate)
        by_rate[rate].append(r)
    done = {rate: statistics.median(rs) for rate, rs in by_rate.items() if len(rs) >= ATTEMPTS}
    pending = [rate for rate in order if len(by_rate[rate]) < ATTEMPTS]
    return done, (pending[-1] if pending else None)


def next_step(goal, history, first_rate):
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
    lo = max(too_slow) if too_slow else None
    hi = min(too_fast) if too_fast else None
    if lo is not None and hi is not None:
        nxt = int((lo * hi) ** 0.5)
    else:
        nxt = int(last * done[last] / goal)  # R ~ 1 / bandwidth
    if nxt in done:
        return ("fail", best, done[best], f"the search reached {nxt} bytes/s again (R {done[nxt]:.2f}); the goal "
                        f"{goal} lies between measurable bandwidths")
    return ("measure", nxt)


def read_history(path):
    history = []
    try:
        f = open(path)
    except FileNotFoundError:
        return history
    with f:
        for line in f:
            if line.strip():
                rate, r = line.split()
                history.append((int(rate), float(r)))
    return history


def main(argv):
    if len(argv) != 5 or argv[1] != "next":
        print(__doc__, file=sys.stderr)
        return 2
    goal, first_rate = float(argv[2]), int(argv[4])
    verb, *values = next_step(goal, read_history(argv[3]), first_rate)
    print(verb, *[f"{v:.2f}" if isinstance(v, float) else v for v in values])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
