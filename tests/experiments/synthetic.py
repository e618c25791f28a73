"""Synthetic runs with known answers for the experiments' tests: a run's evaluations from
its accuracies, and a cell's run files written as the experiment runner writes them."""

import json
from pathlib import Path


def run(accs, steps_apart=20, fresh_per_step=128):
    """A run's evaluations from accuracies (fractions), one every `steps_apart` steps."""
    ev = []
    for i, a in enumerate(accs):
        step = (i + 1) * steps_apart
        ev.append({"step": step, "fresh": step * fresh_per_step, "accuracy": a,
                   "wall_seconds": float(step)})
    last = ev[-1]
    return {"seed": 1, "evals": ev,
            "summary": {"fresh": last["fresh"], "wall_seconds": last["wall_seconds"] + 1,
                        "steps": last["step"], "final_accuracy": last["accuracy"]}}


def write_cell(root, exp, cell, accs_by_seed, fresh_per_step, first_seed=1):
    """The run files of a cell's seeds (from first_seed on), one run per list of accuracies."""
    for seed, accs in enumerate(accs_by_seed, start=first_seed):
        r = run(accs, fresh_per_step=fresh_per_step)
        d = Path(root) / exp / "cells" / cell / f"seed-{seed}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(r["summary"]))
        (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in r["evals"]))
