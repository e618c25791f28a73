"""The noise model of docs/protocol.md's held reading: the evaluation-to-evaluation
swing of validation accuracy on the fixed validation set, from the committed network runs.

Reads only committed run files (results/protocol/network-r5, whose accuracy trajectories
are those of network-r2 and of the sweep's prefixes: same seed, same data order, same
computation). Writes results/protocol/targets/swing.txt and swing.json.

The registered statistic: over the baseline's network runs, seeds 1-5, every pair of
successive evaluations both at step >= 1,950 (the second half of the schedule),
d = a[i+1] - a[i]; sigma = sd(d) / sqrt(2) (sample sd, pooled over the runs:
experiments/stats.py's swing). Beside it: the binomial sampling sd sqrt(p (1 - p) / n)
at p = 0.90, n = 10,000 validation images.

Usage: python3 -m experiments.protocol.swing [--root DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import List, Optional, Sequence, Tuple

from .. import runfiles, stats
from ..runfiles import Json

FROM_STEP = 1950  # the second half of the 3,900-step schedule
SEEDS = [1, 2, 3, 4, 5]
VALIDATION_N = 10000  # experiments/protocol/validation.json: 60,000 - skip 50,000
EVAL_FIELDS = ("step", "accuracy")


def swing(series_list: Sequence[Sequence[float]]) -> Tuple[Optional[float], int]:
    """The swing of each series' successive differences, pooled, and their count.
    series_list: lists of accuracy."""
    d = [b - a for s in series_list for a, b in zip(s, s[1:])]
    return stats.swing(d), len(d)


def late(evals: Sequence[Json], from_step: int = FROM_STEP, to_step: Optional[int] = None) -> List[float]:
    """The accuracies of the evaluations at steps in [from_step, to_step)."""
    return [e["accuracy"] for e in evals
            if e["step"] >= from_step and (to_step is None or e["step"] < to_step)]


def cell_swings(net: str) -> List[Json]:
    """Every cell's swing from FROM_STEP on, with the mean steps between its evaluations."""
    out = []
    for cell in sorted(os.listdir(net)):
        runs = []
        for s in SEEDS:
            p = os.path.join(net, cell, f"seed-{s}", "evals.jsonl")
            if os.path.exists(p):
                runs.append(runfiles.read_evals(p, EVAL_FIELDS))
        sigma, k = swing([late(e) for e in runs])
        spacing = [b["step"] - a["step"] for e in runs for a, b in zip(e, e[1:]) if a["step"] >= FROM_STEP]
        out.append({"cell": cell, "from_step": FROM_STEP, "differences": k, "sigma": sigma,
                    "mean_steps_between_evaluations": sum(spacing) / len(spacing) if spacing else None})
    return out


def swing_doc(root: str) -> Json:
    """swing.json's document: the registered sigma, the baseline's by window of steps,
    every cell's, and the binomial sd beside them."""
    net = os.path.join(root, "network-r5", "cells")
    base = [runfiles.read_evals(os.path.join(net, "baseline", f"seed-{s}", "evals.jsonl"), EVAL_FIELDS)
            for s in SEEDS]
    sigma, n = swing([late(e) for e in base])
    doc: Json = {"registered": {"cell": "baseline", "runs": "network-r5 (= network-r2) seeds 1-5",
                                "from_step": FROM_STEP, "differences": n, "sigma": sigma},
                 "by_window": [], "by_cell": [], "binomial": {}}
    p = 0.90
    doc["binomial"] = {"p": p, "n": VALIDATION_N, "sd": math.sqrt(p * (1 - p) / VALIDATION_N)}
    for lo, hi in [(0, 975), (975, 1950), (1950, 2925), (2925, 3901)]:
        s, k = swing([late(e, lo, hi) for e in base])
        doc["by_window"].append({"cell": "baseline", "from_step": lo, "to_step": hi,
                                 "differences": k, "sigma": s})
    doc["by_cell"] = cell_swings(net)
    return doc


def swing_lines(doc: Json) -> List[str]:
    """swing.txt's lines."""
    reg = doc["registered"]
    lines = ["The evaluation-to-evaluation swing of validation accuracy (docs/protocol.md: the held reading)",
             "sigma = sd of successive differences / sqrt(2), in accuracy points (percent).",
             f"registered: baseline, network runs seeds 1-5, evaluations at step >= {FROM_STEP}: "
             f"sigma = {100 * reg['sigma']:.3f} points ({reg['differences']} differences)",
             f"binomial sampling sd at p = 0.90, n = {VALIDATION_N}: "
             f"{100 * doc['binomial']['sd']:.3f} points (for comparison: the sampling error of a "
             "10,000-image set at 90%)",
             "baseline by window of steps (information, not registered):"]
    for w in doc["by_window"]:
        lines.append(f"  steps {w['from_step']:>4}-{w['to_step'] - 1:<4}: sigma = "
                     f"{100 * w['sigma']:.3f} points ({w['differences']} differences)")
    lines.append(f"every network cell at R about 5, step >= {FROM_STEP} (information; echo "
                 "cells evaluate every 2,500 fresh examples, so e times fewer per step):")
    for c in doc["by_cell"]:
        lines.append(f"  {c['cell']:<24} sigma = {100 * c['sigma']:.3f} points ({c['differences']} "
                     f"differences, {c['mean_steps_between_evaluations']:.1f} steps apart)")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Writes swing.json and swing.txt and prints the lines."""
    ap = argparse.ArgumentParser(prog="python3 -m experiments.protocol.swing")
    ap.add_argument("--root", default="results/protocol")
    ap.add_argument("--out", default="results/protocol/targets")
    a = ap.parse_args(argv)
    doc = swing_doc(a.root)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "swing.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    lines = swing_lines(doc)
    with open(os.path.join(a.out, "swing.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
