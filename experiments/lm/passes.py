#!/usr/bin/python3
"""Where the language model's network runs spend their time, pass by pass over the
500-entry training file (docs/results.md, the language model; docs/lm_protocol.md
change 3). Reads only committed run files: results/lm/<experiment>/cells/*/seed-*/
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
Usage: experiments/lm/passes.py [results/lm/network-r4 ...] | --measure GZIP_FILE
"""
import glob
import json
import os
import statistics
import sys
import zlib

ENTRIES = 500
# The compressed bytes of the first 500 entries of out/lm/gcide/train.jsonl.gz (the split
# of scripts/gcide_split.py): the input a zlib decompressobj had taken, 256 bytes at a
# time, when the 500th line ended (`passes.py --measure out/lm/gcide/train.jsonl.gz`).
# A constant, because the committed results do not include the corpus.
PASS_BYTES = 65280


def measure(path, step=256):
    with open(path, "rb") as f:
        data = f.read()
    d = zlib.decompressobj(16 + 15)
    lines = 0
    for pos in range(0, len(data), step):
        lines += d.decompress(data[pos:pos + step]).count(b"\n")
        if lines >= ENTRIES:
            return pos + step
    return len(data)


def calibration(exp):
    out = {}
    with open(os.path.join(exp, "calibration.txt")) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k.strip()] = v.strip()
    return out


def run_row(summary_path):
    with open(summary_path) as f:
        s = json.load(f)
    if not s.get("reached_target"):
        return None
    fill = s["startup_seconds"]
    after = s["wall_seconds_to_target"] - fill
    passes = (s["raw_reads_to_target"] - ENTRIES) / ENTRIES
    train = s["compute_seconds"] * ENTRIES / s["raw_reads"]
    return {"fill": fill, "after": after, "passes": passes, "s/pass": after / passes,
            "train": train}


def spread(values, fmt="{:.0f}"):
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def report(exp, pass_bytes):
    cal = calibration(exp)
    rate = float(cal["rate"])
    link = pass_bytes / rate
    lines = [f"{os.path.basename(exp)}: {rate:.0f} bytes/s, trainer {cal.get('commit', '?')[:7]}"]
    lines.append(f"link: one pass is {pass_bytes} compressed bytes, {link:.0f} s at {rate:.0f} bytes/s")
    cols = ["fill", "after", "passes", "s/pass", "train"]
    lines.append(f"{'cell':<24}{'seeds':>6}  " + "".join(f"{c:<20}" for c in cols) +
                 "link+train          max(link,train)")
    for cell in sorted(glob.glob(os.path.join(exp, "cells", "*"))):
        rows = [r for r in (run_row(p) for p in
                            sorted(glob.glob(os.path.join(cell, "seed-*", "summary.json")))) if r]
        if not rows:
            continue
        text = f"{os.path.basename(cell):<24}{len(rows):>6}  "
        for c in cols:
            text += f"{spread([r[c] for r in rows], '{:.1f}' if c == 'passes' else '{:.0f}'):<20}"
        text += f"{spread([link + r['train'] for r in rows]):<20}"
        text += spread([max(link, r["train"]) for r in rows])
        lines.append(text)
    return "\n".join(lines) + "\n"


def main():
    if sys.argv[1:2] == ["--measure"]:
        print(measure(sys.argv[2]))
        return
    exps = sys.argv[1:] or sorted(glob.glob("results/lm/network-*"))
    for exp in exps:
        text = report(exp, PASS_BYTES)
        with open(os.path.join(exp, "passes.txt"), "w") as f:
            f.write(text)
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
