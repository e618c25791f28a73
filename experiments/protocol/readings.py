"""Reaching the target, read two ways (docs/protocol.md, "the target, read two ways"),
and the figures of section 5 from a cell's runs.

  first touch: the first evaluation at or above the target;
  held (the registered rule): the first evaluation at or above the target T from which
      no later evaluation of the run falls below T - m, m = 2 sigma = 1.04 points;
  held, thinned (its registered check): the same on the evaluations thinned to one per
      100 steps.

A run that does not reach (or hold) the target counts at its budget, censored.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, TypedDict

from .. import runfiles, stats
from ..runfiles import Json, Run

# The registered constants of the held reading.
SIGMA_BP = 52.2  # the measured swing, basis points of accuracy (0.522 points)
MARGIN_BP = 104  # m = 2 sigma, rounded to 0.01 points
THIN_STEPS = 100  # "held, thinned": one evaluation per 100 steps
READINGS = ["first_touch", "held", "held_thinned"]
READING_LABEL = {"first_touch": "first touch (old reading)", "held": "held",
                 "held_thinned": "held, thinned (the rule's check)"}
SEEDS = [1, 2, 3, 4, 5]
# What the reports read of each run: its evaluations' and its summary's figures.
EVAL_FIELDS = ("step", "fresh", "accuracy", "wall_seconds")
SUMMARY_FIELDS = ("fresh", "wall_seconds", "steps", "final_accuracy")


class Observed(TypedDict):
    """One run read at a target: the fresh examples and wall-clock seconds to it (or to
    the budget, censored) and the step."""

    fresh: int
    wall: float
    censored: bool
    step: int


def load_runs(exp_dir: str, seeds: Sequence[int] = SEEDS, only: Optional[str] = None) -> Dict[str, List[Run]]:
    """{cell: its runs on ``seeds``} of an experiment's cells that have all of them."""
    return runfiles.load_cells(exp_dir, seeds, only, SUMMARY_FIELDS, EVAL_FIELDS)


def load_all_seeds(exp_dir: str) -> Dict[str, List[Run]]:
    """{cell: its runs}: each cell on every final seed it has (the network runs'
    baseline, a-priori e and e = 4 on seeds 1-10, their other cells on 1-5)."""
    return runfiles.load_all_seeds(exp_dir, SUMMARY_FIELDS, EVAL_FIELDS)


def seeds_text(runs: Sequence[Run]) -> str:
    """'1-10', '1-5', or the seeds listed where they are not a range."""
    s = [r["seed"] for r in runs]
    if s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0])
    return ",".join(str(x) for x in s)


def factor_of(cell: str) -> int:
    """The echo factor a cell's id names: before_aug-e5-sb1000 -> 5."""
    return int(cell.split("-e")[1].split("-")[0])


def bp(acc: float) -> int:
    """Accuracy as integer basis points (the validation set has 10,000 images)."""
    return int(round(acc * 10000))


def first_touch(evals: Sequence[Json], target_bp: int) -> Optional[int]:
    """The index of the first evaluation at or above the target; None when there is none."""
    for i, e in enumerate(evals):
        if bp(e["accuracy"]) >= target_bp:
            return i
    return None


def held(evals: Sequence[Json], target_bp: int, margin_bp: int = MARGIN_BP) -> Optional[int]:
    """The first evaluation at or above the target from which no later evaluation falls
    below target - margin; None when there is none (censored)."""
    floor = target_bp - margin_bp
    found = None
    # Walk backwards: an evaluation qualifies if it is >= target and every later one is
    # >= floor; the earliest qualifying one is the answer.
    later_ok = True
    for i in range(len(evals) - 1, -1, -1):
        a = bp(evals[i]["accuracy"])
        if later_ok and a >= target_bp:
            found = i
        later_ok = later_ok and a >= floor
        if not later_ok:
            break
    return found


def thin(evals: Sequence[Json], every: int = THIN_STEPS) -> List[Json]:
    """The first evaluation at or after each multiple of `every` steps, and the last one,
    each kept once."""
    if not evals:
        return []
    keep = []
    mark = every
    for i, e in enumerate(evals):
        if e["step"] >= mark:
            keep.append(i)
            while mark <= e["step"]:
                mark += every
    if not keep or keep[-1] != len(evals) - 1:
        keep.append(len(evals) - 1)
    return [evals[i] for i in keep]


def reading_index(evals: Sequence[Json], target_bp: int, reading: str) -> Tuple[Sequence[Json], Optional[int]]:
    """The evaluations a reading looks at and the index of the one it picks (None: none)."""
    if reading == "first_touch":
        return evals, first_touch(evals, target_bp)
    if reading == "held":
        return evals, held(evals, target_bp)
    t = thin(evals)
    return t, held(t, target_bp)


def observe(run: Run, target_bp: int, reading: str, stop_step: Optional[int] = None) -> Observed:
    """(fresh, wall, censored, step) of one run: the evaluation the reading picks, or the
    budget (censored). stop_step cuts the trajectory (the demo)."""
    evals = run["evals"]
    if stop_step is not None:
        evals = [e for e in evals if e["step"] <= stop_step]
    ev, i = reading_index(evals, target_bp, reading)
    if i is not None:
        e = ev[i]
        return {"fresh": e["fresh"], "wall": e["wall_seconds"], "censored": False, "step": e["step"]}
    if stop_step is not None:  # censored at the last evaluation before the cut
        e = evals[-1]
        return {"fresh": e["fresh"], "wall": e["wall_seconds"], "censored": True, "step": e["step"]}
    s = run["summary"]  # as the experiment runner's report: the run's totals
    return {"fresh": s["fresh"], "wall": s["wall_seconds"], "censored": True, "step": s["steps"]}


def figures(base_runs: Sequence[Run], cell_runs: Sequence[Run], target_bp: int, reading: str,
            stop_step: Optional[int] = None, with_wall: bool = True) -> Json:
    """A cell against its baseline at one target and reading: how many of its runs reach
    it, its median fresh examples, the fresh-example reduction and (with_wall) its median
    wall-clock time and the speedup, each with its interval."""
    b = [observe(r, target_bp, reading, stop_step) for r in base_runs]
    c = [observe(r, target_bp, reading, stop_step) for r in cell_runs]
    out: Json = {
        "reached": sum(1 for o in c if not o["censored"]),
        "runs": len(c),
        "fresh": stats.estimate_median([(o["fresh"], o["censored"]) for o in c]),
        "fresh_by_seed": [None if o["censored"] else o["fresh"] for o in c],
        "step_by_seed": [None if o["censored"] else o["step"] for o in c],
        "fresh_reduction": stats.estimate_ratio([(o["fresh"], o["censored"]) for o in b],
                                                [(o["fresh"], o["censored"]) for o in c]),
    }
    if with_wall:
        out["wall"] = stats.estimate_median([(o["wall"], o["censored"]) for o in c])
        out["speedup"] = stats.estimate_ratio([(o["wall"], o["censored"]) for o in b],
                                              [(o["wall"], o["censored"]) for o in c])
    return out


def ratio_text(e: Optional[Json]) -> str:
    """A ratio as the tables print it: ~ for a censored one, then its interval."""
    if e is None:
        return "-"
    return f"{'~' if e['censored'] else ''}{e['ratio']:.2f}x [{e['ci95'][0]:.2f}-{e['ci95'][1]:.2f}]"


def points_text(x: Optional[float]) -> str:
    """A swing in points as the tables print it (3 decimals); - for none."""
    return "-" if x is None else f"{x:.3f}"


def final_and_swing(runs: Sequence[Run], late_from: int) -> Json:
    """A cell's final validation accuracy (median and by seed) and its late swing (the
    noise model's statistic over the differences of consecutive evaluations from step
    `late_from` on, per evaluation and thinned to one per THIN_STEPS steps, in points;
    None with fewer than two differences)."""
    def sigma(series: Sequence[Sequence[Json]]) -> Optional[float]:
        """The late swing of these evaluation series, in points."""
        s = stats.swing([y["accuracy"] - x["accuracy"] for ev in series
                         for x, y in zip(ev, ev[1:]) if x["step"] >= late_from])
        return None if s is None else s * 100
    fin = [r["summary"]["final_accuracy"] for r in runs]
    return {"final_accuracy_median": stats.median(fin), "final_accuracy_by_seed": fin,
            "sigma_late_points": sigma([r["evals"] for r in runs]),
            "sigma_late_thinned_points": sigma([thin(r["evals"]) for r in runs])}
