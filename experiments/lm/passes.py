"""Where the language model's network runs spend their time, pass by pass over the
500-entry training file (docs/results.md, the language model; docs/lm_protocol.md,
the streamed setup). Reads only committed run files: results/lm/<experiment>/cells/*/seed-*/
summary.json and the experiment's calibration.txt. Writes <experiment>/passes.txt.

Each pass of `take 500, repeat` reads the training file from its start again over the
throttled link. Per run, from summary.json:
  fill     startup_seconds: building the pipeline and filling the entry shuffle of 500
           (one pass and the first entry of the next)
  after    wall_seconds_to_target - fill
  passes   (raw_reads_to_target - 500) / 500: passes read after the fill, to the target
  s/pass   after / passes
  train    compute_seconds * 500 / raw_reads: train-step time per pass (whole run)
  link     the compressed bytes of one pass (the first 500 entries of the gzip file, as
           measured below) over the calibrated bytes/s: the least a pass can take
If reading and training overlap, s/pass is about max(link, train); if they take turns,
about link + train. Cells: median [min-max] over the seeds.
Usage: python3 -m experiments.lm.passes [results/lm/network-r4 ...] | --measure GZIP_FILE
"""

from __future__ import annotations

import glob
import os
import sys
import zlib
from typing import Dict, List, Optional, Sequence

from .. import runfiles, stats

ENTRIES = 500
# The compressed bytes of the first 500 entries of out/lm/gcide/train.jsonl.gz (the split
# of scripts/gcide_split.py): the input a zlib decompressobj had taken, 256 bytes at a
# time, when the 500th line ended (`python3 -m experiments.lm.passes --measure
# out/lm/gcide/train.jsonl.gz`).
# A constant, because the committed results do not include the corpus.
PASS_BYTES = 65280


def measure(path: str, step: int = 256) -> int:
    """The compressed bytes a zlib stream had taken, ``step`` at a time, when the
    ENTRIES-th line of the gzip file at ``path`` ended (all of it when it has fewer)."""
    with open(path, "rb") as f:
        data = f.read()
    d = zlib.decompressobj(16 + 15)
    lines = 0
    for pos in range(0, len(data), step):
        lines += d.decompress(data[pos:pos + step]).count(b"\n")
        if lines >= ENTRIES:
            return pos + step
    return len(data)


def run_row(summary_path: str) -> Optional[Dict[str, float]]:
    """One run's figures (the module's docstring), None when it did not reach the target."""
    s = runfiles.read_json(summary_path, ("compute_seconds", "raw_reads"))
    if not s.get("reached_target"):
        return None
    runfiles.check_fields(summary_path, "a run that reached the target", s,
                          ("startup_seconds", "wall_seconds_to_target", "raw_reads_to_target"))
    fill = s["startup_seconds"]
    after = s["wall_seconds_to_target"] - fill
    passes = (s["raw_reads_to_target"] - ENTRIES) / ENTRIES
    train = s["compute_seconds"] * ENTRIES / s["raw_reads"]
    return {"fill": fill, "after": after, "passes": passes, "s/pass": after / passes,
            "train": train}


def spread(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    """median [min-max] of the values in fmt; - for none."""
    if not values:
        return "-"
    med = stats.median(values)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def report(exp: str, pass_bytes: int) -> str:
    """passes.txt's text for the experiment folder ``exp``."""
    cal = runfiles.read_calibration(os.path.join(exp, "calibration.txt"))
    rate = float(cal["rate"])
    link = pass_bytes / rate
    lines = [f"{os.path.basename(exp)}: {rate:.0f} bytes/s, trainer {cal.get('commit', '?')[:7]}"]
    lines.append(f"link: one pass is {pass_bytes} compressed bytes, {link:.0f} s at {rate:.0f} bytes/s")
    cols = ["fill", "after", "passes", "s/pass", "train"]
    lines.append(f"{'cell':<24}{'seeds':>6}  " + "".join(f"{c:<20}" for c in cols) +
                 "link+train          max(link,train)")
    for cell in sorted(glob.glob(os.path.join(exp, "cells", "*"))):
        found = (run_row(p) for p in sorted(glob.glob(os.path.join(cell, "seed-*", "summary.json"))))
        rows: List[Dict[str, float]] = [r for r in found if r]
        if not rows:
            continue
        text = f"{os.path.basename(cell):<24}{len(rows):>6}  "
        for c in cols:
            text += f"{spread([r[c] for r in rows], '{:.1f}' if c == 'passes' else '{:.0f}'):<20}"
        text += f"{spread([link + r['train'] for r in rows]):<20}"
        text += spread([max(link, r["train"]) for r in rows])
        lines.append(text)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """Writes each experiment's passes.txt and prints it (or --measure's bytes)."""
    if argv[:1] == ["--measure"]:
        print(measure(argv[1]))
        return 0
    exps = list(argv) or sorted(glob.glob("results/lm/network-*"))
    for exp in exps:
        text = report(exp, PASS_BYTES)
        with open(os.path.join(exp, "passes.txt"), "w") as f:
            f.write(text)
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
