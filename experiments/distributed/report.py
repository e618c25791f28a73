"""The data-parallel scaling table (docs/distributed.md) from the committed run files.

Usage: python3 -m experiments.distributed.report results/distributed > summary.md
Reads RESULTS/runs/<config>/seed-N/{summary.json,run.json}; writes RESULTS/runs.csv and
prints a Markdown table: per configuration, the median over seeds (and the range) of
the training-clock seconds to the target, fresh examples to it, R, communication per
step, peak RSS of the largest rank, and the speedup against one rank without echo
(ratio of medians, with the range of the per-seed ratios: 5 seeds hold too little for
a bootstrap interval worth the name).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from .. import runfiles, stats
from ..runfiles import Json

RUN_FIELDS = ("ranks", "factor", "seed", "target", "rate_bytes_per_s_per_connection")
SUMMARY_FIELDS = ("r_estimate", "achieved_echo", "steps", "peak_rss_mib")


def load(results: Path) -> List[Json]:
    """Every run under RESULTS/runs/<config>/seed-N/ as one row of runs.csv."""
    runs = []
    for s in sorted(results.glob("runs/*/seed-*/summary.json")):
        meta = runfiles.read_json(str(s.parent / "run.json"), RUN_FIELDS)
        summ = runfiles.read_json(str(s), SUMMARY_FIELDS)
        runs.append({
            "config": meta["name"], "ranks": meta["ranks"], "factor": meta["factor"],
            "seed": meta["seed"], "target": meta["target"],
            "rate": meta["rate_bytes_per_s_per_connection"], "commit": meta["commit"],
            "load_before": meta["load_before"],
            "reached": summ["reached_target"],
            "seconds_to_target": summ["seconds_to_target"],
            "fresh_to_target": summ["fresh_to_target"],
            "steps_to_target": summ["steps_to_target"],
            "r_estimate": summ["r_estimate"], "achieved_echo": summ["achieved_echo"],
            "comm_ms_per_step": 1000 * summ.get("communication_seconds", 0) / max(summ["steps"], 1),
            "peak_rss_mib": summ["peak_rss_mib"],
            "batch_duplicate_rate": summ.get("batch_duplicate_rate", 0),
            "test_accuracy": summ["test_accuracy"],
        })
    return runs


def med_range(values: Sequence[Optional[float]], fmt: str) -> str:
    """median [min-max] of the values given (None: left out) in fmt; - for none."""
    given = [v for v in values if v is not None]
    if not given:
        return "-"
    return f"{fmt.format(stats.median(given))} [{fmt.format(min(given))}-{fmt.format(max(given))}]"


def main(argv: Sequence[str]) -> int:
    """Writes RESULTS/runs.csv and prints the Markdown table."""
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    results = Path(argv[0])
    runs = load(results)
    if not runs:
        print("no runs yet")
        return 0
    with open(results / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(runs[0]))
        w.writeheader()
        w.writerows(runs)
    base = {r["seed"]: r["seconds_to_target"] for r in runs if r["config"] == "1r-e1" and r["reached"]}
    order = sorted({r["config"] for r in runs}, key=lambda c: (c[1] != "r", c))
    print(f"Target {runs[0]['target']} validation accuracy; {runs[0]['rate']} bytes/s per "
          "connection; global batch 128; median over seeds [min-max].\n")
    print("| configuration | seeds (reached) | seconds to target | fresh to target | R | "
          "comm ms/step | peak RSS MiB (largest rank) | in-batch duplicates | speedup vs 1 rank, no echo |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in order:
        rs = [r for r in runs if r["config"] == c]
        reached = [r for r in rs if r["reached"]]
        ratios = [base[r["seed"]] / r["seconds_to_target"] for r in reached if r["seed"] in base]
        speed = "-"
        if ratios and base:
            med = stats.median(list(base.values())) / stats.median(
                [r["seconds_to_target"] for r in reached])
            speed = f"{med:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
        print(f"| {c} | {len(rs)} ({len(reached)}) "
              f"| {med_range([r['seconds_to_target'] for r in reached], '{:.0f}')} "
              f"| {med_range([r['fresh_to_target'] for r in reached], '{:,.0f}')} "
              f"| {med_range([r['r_estimate'] for r in rs], '{:.2f}')} "
              f"| {med_range([r['comm_ms_per_step'] for r in rs], '{:.2f}')} "
              f"| {med_range([r['peak_rss_mib'] for r in rs], '{:.0f}')} "
              f"| {med_range([100 * r['batch_duplicate_rate'] for r in rs], '{:.1f}')}% "
              f"| {speed} |")
    two = [r["seconds_to_target"] for r in runs if r["config"] == "2r-e1" and r["reached"]]
    if base and two:
        eff = stats.median(list(base.values())) / stats.median(two) / 2
        print(f"\nScaling efficiency without echo (speedup of 2 ranks over 1, divided by 2): {eff:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
