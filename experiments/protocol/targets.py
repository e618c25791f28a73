#!/usr/bin/python3
"""Fresh-example reduction and wall-clock speedup against the target, under two readings
of "reaching the target" (docs/protocol.md change 8):

  first touch (the old reading, section 3): the first evaluation at or above the target;
  held (the registered rule): the first evaluation at or above the target T from which
      no later evaluation of the run falls below T - m, m = 2 sigma = 1.04 points;
  held, thinned (registered check): the same on evaluations thinned to one per 100 steps.

Reads only committed run files (results/protocol/{network-r5,network-r2,sweep}, and the
split setup of change 10, network-split-r5 and network-split-r2, where they are); writes
results/protocol/targets/: table.txt, targets.csv, targets.json, demo_reference.json and
plots/ (gnuplot, PNG and SVG). The statistics are section 5's, reproduced from
src/train/run_statistics.cc (median over seeds, runs that miss counted at their budget,
95% percentile bootstrap of the median, 10,000 resamples, seed 20190715, xoshiro256** with
Lemire's bounded draw, ratios resampling baseline then cell from one stream); the script
checks that it gives the committed tables' 90% first-touch figures exactly.

Usage: experiments/protocol/targets.py [--root results/protocol] [--out DIR] [--no-plots]
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np

# --- the registered constants (docs/protocol.md change 8) -------------------------------
SIGMA_BP = 52.2          # the measured swing, basis points of accuracy (0.522 points)
MARGIN_BP = 104          # m = 2 sigma, rounded to 0.01 points
THIN_STEPS = 100         # "held, thinned": one evaluation per 100 steps
TARGET_FROM_BP = 8700    # 87.00%
TARGET_STEP_BP = 25      # 0.25 points
SEEDS = [1, 2, 3, 4, 5]
DEMO = {"target_bp": 8900, "stop_step": 2600,
        "cells": ["baseline", "before_aug-e5-sb1000", "adaptive-m6-sb1000"]}
READINGS = ["first_touch", "held", "held_thinned"]
# The network runs: the shared setup (section 6) and the train step on a core of its own
# (change 10, "split"), each at R about 5 and about 2.
NETWORK_EXPS = ["network-r5", "network-r2", "network-split-r5", "network-split-r2"]
READING_LABEL = {"first_touch": "first touch (old reading)", "held": "held (change 8)",
                 "held_thinned": "held, thinned (change 8 check)"}

# --- section 5's statistics, as src/train/run_statistics.cc computes them ---------------
MASK = (1 << 64) - 1
BOOT_SEED = 20190715
RESAMPLES = 10000
LEVEL = 0.95


def _mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Rng:
    """dataecho::Rng (include/dataecho/core/rng.h): xoshiro256** seeded by SplitMix64."""

    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            self.s.append(_mix64(x))

    def next_u64(self):
        s = self.s
        r = ((((s[1] * 5) & MASK) << 7 | ((s[1] * 5) & MASK) >> 57) & MASK) * 9 & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = ((s[3] << 45) | (s[3] >> 19)) & MASK
        return r

    def uniform(self, n):
        m = self.next_u64() * n
        low = m & MASK
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & MASK
        return m >> 64


_INDEX_CACHE = {}


def _indices(sizes):
    """The resample indices the C++ draws for runs of these sizes, in order, from one Rng."""
    key = tuple(sizes)
    if key not in _INDEX_CACHE:
        rng = Rng(BOOT_SEED)
        out = []
        for n in sizes:
            out.append(np.array([[rng.uniform(n) for _ in range(n)] for _ in range(RESAMPLES)],
                                dtype=np.int64))
        _INDEX_CACHE[key] = out
    return _INDEX_CACHE[key]


def censored_median(obs):
    """obs: [(value, censored)]: the median, and whether it falls on a censored run."""
    runs = sorted(obs, key=lambda o: (o[0], o[1]))
    n = len(runs)
    if n % 2:
        return runs[n // 2][0], runs[n // 2][1]
    a, b = runs[n // 2 - 1], runs[n // 2]
    return (a[0] + b[0]) / 2, a[1] or b[1]


def _quantile_sorted(v, p):
    rank = math.ceil(p * len(v))
    rank = min(max(rank, 1), len(v))
    return float(v[rank - 1])


def _interval(stats):
    stats = np.sort(stats)
    return (_quantile_sorted(stats, (1 - LEVEL) / 2), _quantile_sorted(stats, (1 + LEVEL) / 2))


def _resampled_medians(values, idx):
    return np.median(np.asarray(values, dtype=float)[idx], axis=1)


def estimate_median(obs):
    if not obs:
        return None
    med, cens = censored_median(obs)
    (idx,) = _indices([len(obs)])
    lo, hi = _interval(_resampled_medians([o[0] for o in obs], idx))
    return {"median": med, "ci95": [lo, hi], "n": len(obs),
            "censored": sum(1 for o in obs if o[1]), "median_censored": cens}


def estimate_ratio(base, cell):
    if not base or not cell:
        return None
    b, bc = censored_median(base)
    c, cc = censored_median(cell)
    if not c > 0:
        return None
    bi, ci = _indices([len(base), len(cell)])
    bm = _resampled_medians([o[0] for o in base], bi)
    cm = _resampled_medians([o[0] for o in cell], ci)
    keep = cm > 0
    lo, hi = _interval(bm[keep] / cm[keep])
    return {"ratio": b / c, "ci95": [lo, hi], "censored": bool(bc or cc)}


# --- the readings -------------------------------------------------------------------
def bp(acc):
    """Accuracy as integer basis points (the validation set has 10,000 images)."""
    return int(round(acc * 10000))


def first_touch(evals, target_bp):
    for i, e in enumerate(evals):
        if bp(e["accuracy"]) >= target_bp:
            return i
    return None


def held(evals, target_bp, margin_bp=MARGIN_BP):
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


def thin(evals, every=THIN_STEPS):
    """The first evaluation at or after each multiple of `every` steps, and the last one,
    each kept once."""
    if not evals:
        return []
    keep = []
    last_step = evals[-1]["step"]
    mark = every
    for i, e in enumerate(evals):
        if e["step"] >= mark:
            keep.append(i)
            while mark <= e["step"]:
                mark += every
    if not keep or keep[-1] != len(evals) - 1:
        keep.append(len(evals) - 1)
    assert evals[keep[-1]]["step"] == last_step
    return [evals[i] for i in keep]


def reading_index(evals, target_bp, reading):
    if reading == "first_touch":
        return evals, first_touch(evals, target_bp)
    if reading == "held":
        return evals, held(evals, target_bp)
    t = thin(evals)
    return t, held(t, target_bp)


# --- run files ------------------------------------------------------------------------
def load_runs(exp_dir, seeds=SEEDS, only=None):
    """{cell: [run]} with run = {seed, evals, summary}, the seeds in order, cells with all
    of them only (only: that cell alone)."""
    cells = {}
    cdir = os.path.join(exp_dir, "cells")
    for cell in sorted(os.listdir(cdir)) if only is None else [only]:
        runs = []
        for s in seeds:
            d = os.path.join(cdir, cell, f"seed-{s}")
            if not os.path.exists(os.path.join(d, "summary.json")):
                break
            with open(os.path.join(d, "summary.json")) as f:
                summary = json.load(f)
            with open(os.path.join(d, "evals.jsonl")) as f:
                evals = [json.loads(line) for line in f if line.strip()]
            runs.append({"seed": s, "evals": evals, "summary": summary})
        if len(runs) == len(seeds):
            cells[cell] = runs
    return cells


def load_all_seeds(exp_dir):
    """{cell: [run]}: each cell on every final seed it has (seed-N folders with a
    summary), in seed order. Change 12: the network runs' baseline, a-priori e and e = 4
    have seeds 1-10, their other cells 1-5; each is read on all of its seeds."""
    cdir = os.path.join(exp_dir, "cells")
    cells = {}
    for cell in sorted(os.listdir(cdir)):
        seeds = sorted(int(d[5:]) for d in os.listdir(os.path.join(cdir, cell))
                       if d.startswith("seed-")
                       and os.path.exists(os.path.join(cdir, cell, d, "summary.json")))
        if seeds:
            cells.update(load_runs(exp_dir, seeds, only=cell))
    return cells


def seeds_text(runs):
    """'1-10', '1-5', or the seeds listed where they are not a range."""
    s = [r["seed"] for r in runs]
    if s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0])
    return ",".join(str(x) for x in s)


# --- change 12: the network runs' seeds from two machines ------------------------------
# Seeds 1-5 ran on 2026-12-01's machine, 6-10 (change 9) on 2026-12-05's, whose train step
# is about 20% faster, at the same bandwidth.
MACHINES = {"seeds 1-5 (2026-12-01)": list(range(1, 6)),
            "seeds 6-10 (2026-12-05)": list(range(6, 11))}


def factor_of(cell):
    """The echo factor a cell's id names: before_aug-e5-sb1000 -> 5."""
    return int(cell.split("-e")[1].split("-")[0])


def machines_section(runs, apriori):
    """Change 12's wall-clock reading at 90%: for the a-priori cell and e = 4 (the cells
    with seeds on both machines), the speedup and reduction under both readings on seeds
    1-10 and on each machine's seeds alone, each beside its baseline's median R in
    training and the ideal min(e, R); and whether the two machines' intervals of the
    a-priori cell's held speedup overlap (if not, the pooled figure is not the headline).
    None before the baseline has seeds on both machines."""
    base = runs.get("baseline", [])
    sets = {"seeds 1-10 (both machines)": sorted({r["seed"] for r in base}), **MACHINES}
    if any(not set(s) <= {r["seed"] for r in base} for s in MACHINES.values()):
        return None
    out = {"registered": "docs/protocol.md change 12", "target": 90.0, "cells": {}}
    for cell in dict.fromkeys([apriori, "before_aug-e4-sb1000"]):
        if cell not in runs or len(runs[cell]) < len(base):
            continue
        e = factor_of(cell)
        by = {}
        for name, seeds in sets.items():
            b = [r for r in base if r["seed"] in seeds]
            c = [r for r in runs[cell] if r["seed"] in seeds]
            r_train = float(np.median([r["summary"]["r_estimate"] for r in b]))
            by[name] = {"seeds": seeds, "r_train_baseline": r_train, "ideal": min(e, r_train),
                        **{reading: figures(b, c, 9000, reading)
                           for reading in ("held", "first_touch")}}
        a, b_ = (by[m]["held"]["speedup"]["ci95"] for m in MACHINES)
        out["cells"][cell] = {"factor": e, "by_seeds": by,
                              "held_speedup_intervals_overlap": a[0] <= b_[1] and b_[0] <= a[1]}
    if apriori in out["cells"]:
        out["pooled_is_headline"] = out["cells"][apriori]["held_speedup_intervals_overlap"]
    return out


def machines_text(m):
    """table.txt's lines for machines_section's result."""
    out = ["-- change 12: 90%, on seeds 1-10 and on each machine's seeds; R = the baseline's "
           "median R in training, ideal min(e, R)"]
    for cell, v in m["cells"].items():
        for name, by in v["by_seeds"].items():
            out.append(f"  {cell:<22} {name:<28} R {by['r_train_baseline']:.2f} ideal "
                       f"{by['ideal']:.2f}: speedup held {ratio_text(by['held']['speedup'])}, "
                       f"first touch {ratio_text(by['first_touch']['speedup'])}; fresh/ held "
                       f"{ratio_text(by['held']['fresh_reduction'])}, first touch "
                       f"{ratio_text(by['first_touch']['fresh_reduction'])}")
        out.append(f"  {cell:<22} the two machines' intervals of the held speedup "
                   + ("overlap" if v["held_speedup_intervals_overlap"] else "do not overlap"))
    if "pooled_is_headline" in m:
        out.append("  headline (change 12): " + ("the pooled seeds 1-10" if m["pooled_is_headline"]
                                                 else "each machine's figure, the lower first"))
    return out


def final_and_swing(runs, late_from):
    """A cell's final validation accuracy (median and by seed) and its late swing: change
    8's statistic over the differences of consecutive evaluations from step `late_from`
    on, per evaluation and thinned to one per THIN_STEPS steps, in points (None with fewer
    than two differences)."""
    def sigma(series):
        d = [y["accuracy"] - x["accuracy"] for ev in series
             for x, y in zip(ev, ev[1:]) if x["step"] >= late_from]
        return float(np.std(d, ddof=1) / math.sqrt(2) * 100) if len(d) >= 2 else None
    fin = [r["summary"]["final_accuracy"] for r in runs]
    return {"final_accuracy_median": float(np.median(fin)), "final_accuracy_by_seed": fin,
            "sigma_late_points": sigma([r["evals"] for r in runs]),
            "sigma_late_thinned_points": sigma([thin(r["evals"]) for r in runs])}


# --- the controls of change 9 (issue #42) -----------------------------------------------
CONTROL_SEEDS_A1 = list(range(1, 11))
BUDGETS_C = [1950, 2925, 3900, 5850]


def controls_section(root):
    """Change 9's A1 and C, read by the rule at 90%, from results/protocol/controls (and,
    for the 3,900-step budget and the baseline, network-r5: the same computation, change
    4). None when no control has all its seeds."""
    cdir = os.path.join(root, "controls")
    if not os.path.isdir(os.path.join(cdir, "cells")):
        return None
    out = {"registered": "docs/protocol.md change 9", "target": 90.0, "reading": "held"}
    net = os.path.join(root, "network-r5")
    # A1: after augmentation (identical copies) against the baseline, seeds 1-10 where the
    # baseline has them, else 1-5 (said in the output).
    a1 = {}
    for seeds in (CONTROL_SEEDS_A1, SEEDS):
        ctl, base = load_runs(cdir, seeds), load_runs(net, seeds).get("baseline")
        for e in (2, 4):
            cell = f"after_aug-e{e}-sb1000"
            if cell in a1 or cell not in ctl or base is None:
                continue
            f = figures(base, ctl[cell], 9000, "held", with_wall=False)
            red = f["fresh_reduction"]
            a1[cell] = {"factor": e, "seeds": seeds, "figures": f,
                        "refutes_A": bool(red and red["ci95"][0] > e),
                        "final": final_and_swing(ctl[cell], 1950),
                        "baseline_final": final_and_swing(base, 1950)}
    out["A1"] = a1
    # C: each cell's smallest median fresh examples to hold 90% over the budgets at which
    # at least 3 of 5 seeds hold it; the reduction between the two cells' best budgets.
    c_out, best_runs = {}, {}
    budget_runs = load_budget_runs(root)
    for cell, stem in (("baseline", "baseline"), ("e4", "before_aug-e4-sb1000")):
        c_out[cell], runs = budget_choice(budget_runs, stem)
        if runs:
            best_runs[cell] = runs
    if len(best_runs) == 2:
        red = figures(best_runs["baseline"], best_runs["e4"], 9000, "held",
                      with_wall=False)["fresh_reduction"]
        c_out["reduction"] = red
        if c_out["baseline"]["complete"] and c_out["e4"]["complete"]:
            c_out["verdict"] = "refutes C" if red["ci95"][0] > 4 else "supports C"
        else:
            c_out["verdict"] = "not read yet: not every budget has run"
    out["C"] = c_out
    return out


def load_budget_runs(root):
    """(controls, network-r5): the runs budget_choice reads, seeds 1-5, loaded once."""
    return load_runs(os.path.join(root, "controls")), load_runs(os.path.join(root, "network-r5"))


def budget_choice(budget_runs, stem):
    """Change 9's C and change 13's rule for one cell (`stem`, a cell id of the network
    runs): on seeds 1-5, at each budget of BUDGETS_C (3,900 from network-r5, the others
    from controls/<stem>-s<S>: fresh counts do not depend on R, change 4), how many seeds
    hold 90% and their median fresh examples to it; the best budget is the one with the
    smallest median among those where at least 3 of 5 hold (a tie: the shorter).
    budget_runs: load_budget_runs(root). Returns (the choice as JSON, the best budget's
    runs or None)."""
    ctl, netr = budget_runs
    per = {}
    for S in BUDGETS_C:
        runs = netr.get(stem) if S == 3900 else ctl.get(f"{stem}-s{S}")
        if runs is None:
            continue
        obs = [observe(r, 9000, "held") for r in runs]
        per[S] = {"runs": runs, "held": sum(1 for o in obs if not o["censored"]),
                  "fresh": estimate_median([(o["fresh"], o["censored"]) for o in obs]),
                  "final": final_and_swing(runs, S // 2)}
    eligible = [S for S, v in per.items() if v["held"] >= 3]  # BUDGETS_C order: ties go short
    best = min(eligible, key=lambda S: per[S]["fresh"]["median"]) if eligible else None
    choice = {"budgets": {str(S): {"held": v["held"], "fresh": v["fresh"], "final": v["final"]}
                          for S, v in per.items()},
              "complete": len(per) == len(BUDGETS_C), "best_budget": best}
    return choice, (per[best]["runs"] if best else None)


# --- change 13: each cell's schedule ending at its own best budget ------------------------
BUDGET_CELLS = [("baseline", "baseline"), ("e4", "before_aug-e4-sb1000"),
                ("e5", "before_aug-e5-sb1000")]
BUDGET_SEEDS = list(range(1, 11))


def budgets_choice(root):
    """{cell: its chosen budget, or None}, once every budget of every cell has run."""
    out = {}
    budget_runs = load_budget_runs(root)
    for cell, stem in BUDGET_CELLS:
        choice, _ = budget_choice(budget_runs, stem)
        out[cell] = {"stem": stem, **choice}
    return out


def budgets_section(root):
    """Change 13: each cell's budget chosen on local runs, then the network runs at R about 5
    (network-r5's calibration) at those budgets, seeds 1-10: fresh reduction and wall-clock
    speedup at 90% under both readings, beside the 3,900-step headline. A cell whose budget
    is 3,900 is read from network-r5 (those are its runs); the others from
    network-budgets-r5/cells/<stem>-s<S>."""
    choice = budgets_choice(root)
    out = {"registered": "docs/protocol.md change 13", "target": 90.0, "choice": choice}
    if not all(v["complete"] and v["best_budget"] for v in choice.values()):
        out["status"] = "choosing: not every budget of every cell has its 5 local seeds"
        return out
    final, missing = {}, []
    for cell, v in choice.items():
        S, stem = v["best_budget"], v["stem"]
        exp = "network-r5" if S == 3900 else "network-budgets-r5"
        cid = stem if S == 3900 else f"{stem}-s{S}"
        d = os.path.join(root, exp)
        runs = (load_runs(d, BUDGET_SEEDS, only=cid)
                if os.path.isdir(os.path.join(d, "cells", cid)) else {})
        if cid in runs:
            final[cell] = runs[cid]
        else:
            missing.append(f"{exp}/{cid}")
    if missing:
        out["status"] = "final runs to do: " + ", ".join(missing) + f" (seeds 1-10)"
        return out
    out["status"] = "complete"
    out["baseline_r_in_training"] = statistics.median(
        r["summary"]["r_estimate"] for r in final["baseline"])
    out["figures"] = {cell: {reading: figures(final["baseline"], final[cell], 9000, reading)
                             for reading in ("first_touch", "held")}
                      for cell in ("e4", "e5")}
    return out


def budgets_lines(b):
    """table.txt's lines for change 13."""
    if not b:
        return []
    lines = ["", "== change 13: each cell's schedule ending at its own best budget (90%) =="]
    for cell, v in b["choice"].items():
        lines.append(f"  {cell}: " + ", ".join(
            f"S={S}: {x['held']}/5 hold, median {'~' if x['fresh']['median_censored'] else ''}"
            f"{x['fresh']['median']:.0f}" for S, x in v["budgets"].items())
            + f"; chosen budget {v['best_budget']}" + ("" if v["complete"] else " (not every budget has run)"))
    lines.append(f"  status: {b['status']}")
    if b["status"] == "complete":
        lines.append(f"  baseline's R in training (median over its seeds): {b['baseline_r_in_training']:.2f}")
        for cell, f in b["figures"].items():
            for reading, x in f.items():
                lines.append(f"  {cell} {reading}: fresh/ {ratio_text(x['fresh_reduction'])}, speedup "
                             f"{ratio_text(x['speedup'])}, reached {x['reached']}/{x['runs']}")
    return lines


def retune_section(root):
    """Change 9's B and A2 from results/protocol/retune: the runs of each tuning group's
    winner (the only member with final runs) and of batch augmentation, seeds 1-10 (1-5
    while the rest run), read by the rule at 90%. None before any of them has its seeds."""
    rdir = os.path.join(root, "retune")
    if not os.path.isdir(os.path.join(rdir, "cells")):
        return None
    out = {"registered": "docs/protocol.md change 9", "target": 90.0, "reading": "held"}
    for seeds in (CONTROL_SEEDS_A1, SEEDS):
        runs = load_runs(rdir, seeds)
        base_net = load_runs(os.path.join(root, "network-r5"), seeds).get("baseline")
        winners = {}
        for stem in ("baseline", "before_aug-e4-sb1000"):
            won = [c for c in runs if c == stem or c.startswith(stem + "-wd")]
            if len(won) == 1:
                winners[stem] = won[0]
        if "B" not in out and len(winners) == 2:
            f = figures(runs[winners["baseline"]], runs[winners["before_aug-e4-sb1000"]],
                        9000, "held", with_wall=False)
            red = f["fresh_reduction"]
            out["B"] = {"seeds": seeds, "baseline_cell": winners["baseline"],
                        "e4_cell": winners["before_aug-e4-sb1000"], "figures": f,
                        "final": {c: final_and_swing(runs[c], 1950)
                                  for c in winners.values()},
                        "verdict": "refutes B" if red and red["ci95"][0] > 4 else "supports B"}
        if "A2" not in out and "batchaug-e2-bs256" in runs and base_net:
            f = figures(base_net, runs["batchaug-e2-bs256"], 9000, "held", with_wall=False)
            red = f["fresh_reduction"]
            out["A2"] = {"seeds": seeds, "figures": f,
                         "final": final_and_swing(runs["batchaug-e2-bs256"], 1950),
                         "baseline_final": final_and_swing(base_net, 1950),
                         "supports_A": bool(red and red["ci95"][0] > 1)}
    return out


def observe(run, target_bp, reading, stop_step=None):
    """(fresh, wall, censored, step, accuracy_at) of one run: the evaluation the reading
    picks, or the budget (censored). stop_step cuts the trajectory (the demo)."""
    evals = run["evals"]
    if stop_step is not None:
        evals = [e for e in evals if e["step"] <= stop_step]
    ev, i = reading_index(evals, target_bp, reading)
    if i is not None:
        e = ev[i]
        return {"fresh": e["fresh"], "wall": e["wall_seconds"], "censored": False,
                "step": e["step"]}
    if stop_step is not None:  # censored at the last evaluation before the cut
        e = evals[-1]
        return {"fresh": e["fresh"], "wall": e["wall_seconds"], "censored": True,
                "step": e["step"]}
    s = run["summary"]  # as experiment_report.cc: the run's totals
    return {"fresh": s["fresh"], "wall": s["wall_seconds"], "censored": True,
            "step": s["steps"]}


def figures(base_runs, cell_runs, target_bp, reading, stop_step=None, with_wall=True):
    b = [observe(r, target_bp, reading, stop_step) for r in base_runs]
    c = [observe(r, target_bp, reading, stop_step) for r in cell_runs]
    out = {
        "reached": sum(1 for o in c if not o["censored"]),
        "runs": len(c),
        "fresh": estimate_median([(o["fresh"], o["censored"]) for o in c]),
        "fresh_by_seed": [None if o["censored"] else o["fresh"] for o in c],
        "step_by_seed": [None if o["censored"] else o["step"] for o in c],
        "fresh_reduction": estimate_ratio([(o["fresh"], o["censored"]) for o in b],
                                          [(o["fresh"], o["censored"]) for o in c]),
    }
    if with_wall:
        out["wall"] = estimate_median([(o["wall"], o["censored"]) for o in c])
        out["speedup"] = estimate_ratio([(o["wall"], o["censored"]) for o in b],
                                        [(o["wall"], o["censored"]) for o in c])
    return out


def ratio_text(e):
    if e is None:
        return "-"
    return f"{'~' if e['censored'] else ''}{e['ratio']:.2f}x [{e['ci95'][0]:.2f}-{e['ci95'][1]:.2f}]"


def pct(t_bp):
    return f"{t_bp / 100:.2f}%"


# --- the check against the committed tables -------------------------------------------
def check_against_committed(exp_dir, runs):
    """The 90% first-touch figures of results.json, recomputed from `runs` (each cell on
    every final seed it has, as the runner reads them): (checked, mismatches)."""
    with open(os.path.join(exp_dir, "results.json")) as f:
        doc = json.load(f)
    checked, bad = 0, []
    base = runs.get("baseline")
    for c in doc["cells"]:
        if c["cell"] not in runs or c["cell"] == "baseline" or base is None:
            continue
        if c.get("batch_size", 0) not in (0, 128):
            continue
        mine = figures(base, runs[c["cell"]], 9000, "first_touch",
                       with_wall="network" in os.path.basename(exp_dir))
        for key, est_key in (("fresh_reduction", "fresh_reduction"), ("speedup", "speedup")):
            theirs = c["estimates"].get(est_key)
            if theirs is None or key not in mine:
                continue
            m = mine[key]
            same = (abs(m["ratio"] - theirs["ratio"]) < 1e-9
                    and all(abs(x - y) < 1e-9 for x, y in zip(m["ci95"], theirs["ci95"]))
                    and m["censored"] == theirs["censored"])
            checked += 1
            if not same:
                bad.append(f"{os.path.basename(exp_dir)} {c['cell']} {key}: "
                           f"mine {ratio_text(m)}, committed {ratio_text(theirs)}")
    return checked, bad


# --- plots ------------------------------------------------------------------------------
def target_plots(gp, names, pdir, exp, e):
    """The plots of each metric and reading against the target for one network experiment:
    their data files in pdir, their gnuplot lines appended to gp, their names to names."""
    for metric, ylabel in (("fresh_reduction", "fresh-example reduction (baseline / cell)"),
                           ("speedup", "wall-clock speedup (baseline / cell)")):
        for reading in READINGS:
            name = f"{metric}_{exp}_{reading}"
            dat = f"{name}.dat"
            series = []
            with open(os.path.join(pdir, dat), "w") as f:
                for cell, rows in e["cells"].items():
                    if cell == "baseline":
                        continue
                    f.write(f"# {cell}\n")
                    for r in rows:
                        est = r[reading].get(metric)
                        if est is None:
                            continue
                        f.write(f"{r['target_bp'] / 100:.2f} {est['ratio']:.6g} "
                                f"{est['ci95'][0]:.6g} {est['ci95'][1]:.6g} "
                                f"{1 if est['censored'] else 0}\n")
                    f.write("\n\n")
                    series.append(cell)
            gp.append(f"set output \"{name}.\".fmt")
            gp.append(f"set title \"{exp}: {metric.replace('_', ' ')} vs target, "
                      f"{READING_LABEL[reading]}; median over each cell's seeds (table.txt), 95% bootstrap "
                      "CI; censored medians (~) in table.txt\"")
            gp.append("set xlabel \"target validation accuracy (%)\"")
            gp.append(f"set ylabel \"{ylabel}\"")
            gp.append("set xrange [86.9:90.6]\nset yrange [0:*]")
            parts = []
            for i, cell in enumerate(series):
                parts.append(f"\"{dat}\" index {i} using 1:2:3:4 with yerrorlines lc {i + 1} "
                             f"title \"{cell}\"")
            for k in (2, 4, 5):
                parts.append(f"{k} with lines dt 2 lc rgb \"black\" notitle")
            gp.append("plot " + ", \\\n  ".join(parts))
            names.append(name)


def headline_plot(gp, names, pdir, exp, e):
    """The headline plot of one network experiment (e = 4 and the a-priori cell, both
    readings, fresh and wall), as target_plots does."""
    name = f"headline_{exp}"
    apriori = e.get("apriori")
    cells = [c for c in ["before_aug-e4-sb1000", apriori] if c and c in e["cells"]]
    if not cells:
        return
    cells = list(dict.fromkeys(cells))
    dat = f"{name}.dat"
    titles = []
    with open(os.path.join(pdir, dat), "w") as f:
        for cell in cells:
            for reading in ("first_touch", "held"):
                for metric in ("fresh_reduction", "speedup"):
                    f.write(f"# {cell} {reading} {metric}\n")
                    for r in e["cells"][cell]:
                        est = r[reading].get(metric)
                        if est is None:
                            continue
                        f.write(f"{r['target_bp'] / 100:.2f} {est['ratio']:.6g} "
                                f"{est['ci95'][0]:.6g} {est['ci95'][1]:.6g}\n")
                    f.write("\n\n")
                    titles.append(f"{cell}, {metric.replace('_', ' ')}, "
                                  f"{READING_LABEL[reading]}")
    gp.append(f"set output \"{name}.\".fmt")
    gp.append("set key below")
    gp.append(f"set title \"{exp}: headline cells vs target, both readings "
              "(median over each cell's seeds, 95% bootstrap CI; dashed black: 3x)\"")
    gp.append("set xlabel \"target validation accuracy (%)\"")
    gp.append("set ylabel \"baseline / cell (fresh examples, or wall-clock time)\"")
    gp.append("set xrange [86.9:90.6]\nset yrange [0:*]")
    parts = []
    for i, t in enumerate(titles):
        dt = "1" if "held" in t else "2"
        parts.append(f"\"{dat}\" index {i} using ($1+{(i % 4) * 0.02 - 0.03:.2f}):2:3:4 "
                     f"with yerrorlines dt {dt} lc {i // 2 + 1} title \"{t}\"")
    parts.append("3 with lines dt 2 lc rgb \"black\" notitle")
    gp.append("plot " + ", \\\n  ".join(parts))
    names.append(name)
    gp.append("set key outside right top")


def write_plots(out_dir, doc, draw=True):
    """plots/: each network experiment's plots against the target (data files and
    plots.gp), drawn with gnuplot unless draw is false; what was done, in words."""
    pdir = os.path.join(out_dir, "plots")
    os.makedirs(pdir, exist_ok=True)
    gp = ["# Written by experiments/protocol/targets.py; run `gnuplot plots.gp` in this folder.",
          "set key outside right top", "set grid",
          "do for [fmt in \"png svg\"] {",
          "if (fmt eq \"png\") { set terminal pngcairo size 1000,600 noenhanced font \"sans,10\" } "
          "else { set terminal svg size 1000,600 noenhanced font \"sans,10\" dynamic }"]
    names = []
    for exp in NETWORK_EXPS:
        if exp not in doc["experiments"]:
            continue
        e = doc["experiments"][exp]
        target_plots(gp, names, pdir, exp, e)
        headline_plot(gp, names, pdir, exp, e)
    gp.append("}")
    with open(os.path.join(pdir, "plots.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    if not draw:
        return "plots not requested"
    if not shutil.which("gnuplot"):
        return "gnuplot not found: plots.gp written, not drawn"
    r = subprocess.run(["gnuplot", "plots.gp"], cwd=pdir, capture_output=True, text=True)
    with open(os.path.join(pdir, "gnuplot.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return f"gnuplot failed: see {os.path.join(pdir, 'gnuplot.log')}"
    return f"{2 * len(names)} plots in {pdir}"


# --- the sections of targets.json and table.txt ---------------------------------------
def experiment_section(root, exp, runs, targets, csv_rows):
    """One experiment's figures at every target and reading (rows appended to
    csv_rows); for the network runs also the a-priori cell, each cell's final accuracy,
    late swing, step compute and R, and change 12's per-machine reading."""
    network = exp.startswith("network")
    readings = READINGS if network else ["first_touch"]
    base = runs["baseline"]
    cells = {}
    for cell, cr in runs.items():
        if "bs1024" in cell:
            continue
        rows = []
        for t in targets:
            row = {"target_bp": t, "target": t / 100}
            for reading in readings:
                row[reading] = figures(base, cr, t, reading, with_wall=network)
                f = row[reading]
                fr, sp = f.get("fresh_reduction"), f.get("speedup")
                csv_rows.append(",".join(str(x) for x in [
                    exp, cell, f"{t / 100:.2f}", reading, f["reached"], f["runs"],
                    f"{f['fresh']['median']:.6g}", int(f["fresh"]["median_censored"]),
                    *(["", "", "", ""] if cell == "baseline" or fr is None else
                      [f"{fr['ratio']:.4g}", f"{fr['ci95'][0]:.4g}", f"{fr['ci95'][1]:.4g}",
                       int(fr["censored"])]),
                    f"{f['wall']['median']:.6g}" if "wall" in f else "",
                    *(["", "", "", ""] if cell == "baseline" or sp is None else
                      [f"{sp['ratio']:.4g}", f"{sp['ci95'][0]:.4g}", f"{sp['ci95'][1]:.4g}",
                       int(sp["censored"])])]))
            rows.append(row)
        cells[cell] = rows
    e = {"cells": cells, "readings": readings}
    if network:
        cal = os.path.join(root, exp, "calibration.txt")
        if os.path.exists(cal):
            for line in open(cal):
                if line.startswith("factor:"):
                    e["apriori"] = f"before_aug-e{int(line.split()[1])}-sb1000"
        # Final accuracy and late swing per cell (issue #42's "beside the baseline's").
        e["final"] = {}
        for cell, cr in runs.items():
            e["final"][cell] = {
                **final_and_swing(cr, 1950),
                "test_accuracy_at_first_touch_90_median":
                    float(np.median([r["summary"].get("test_accuracy", float("nan"))
                                     for r in cr])),
                # Change 10's prediction: each cell's step compute within 5% of the
                # baseline's; R in training (r_estimate) beside it.
                "compute_ms_per_step_median": float(np.median(
                    [1000 * r["summary"]["compute_seconds"] / r["summary"]["steps"]
                     for r in cr])),
                "r_estimate_median": float(np.median([r["summary"]["r_estimate"]
                                                      for r in cr])),
            }
            # The process's CPU time over training (snapshots evaluated after it),
            # recorded by trainers from commit 53ff043 on: every run goes to 3,900 steps.
            if all("cpu_seconds" in r["summary"] for r in cr):
                e["final"][cell]["cpu_seconds_median"] = float(np.median(
                    [r["summary"]["cpu_seconds"] for r in cr]))
                e["final"][cell]["cpu_seconds_by_seed"] = [r["summary"]["cpu_seconds"]
                                                          for r in cr]
        if e.get("apriori"):
            m = machines_section(runs, e["apriori"])
            if m:
                e["machines"] = m
    return e


def setups_section(experiments, net_targets):
    # Change 10/11: the split setup beside the shared one at 90%, and change 10's
    # predictions (step compute within 5% of the baseline's; the a-priori cell's speedup at
    # or below min(e, R) with R the split baseline's in training).
    setups = {}
    i90 = net_targets.index(9000) if 9000 in net_targets else None
    for r in ("5", "2"):
        sh, sp = f"network-r{r}", f"network-split-r{r}"
        if i90 is None or sp not in experiments:
            continue
        ep, es = experiments[sp], experiments.get(sh, {"cells": {}})
        side = {}
        for cell, rows in ep["cells"].items():
            if cell == "baseline":
                continue
            side[cell] = {reading: {
                "split": {k: rows[i90][reading].get(k) for k in ("fresh_reduction", "speedup")},
                "shared": ({k: es["cells"][cell][i90][reading].get(k)
                            for k in ("fresh_reduction", "speedup")}
                           if cell in es["cells"] else None)}
                for reading in ("held", "first_touch")}
        fin = ep.get("final", {})
        base_ms = fin["baseline"]["compute_ms_per_step_median"] if "baseline" in fin else None
        pred = {"step_vs_baseline": {c: v["compute_ms_per_step_median"] / base_ms - 1
                                     for c, v in fin.items() if c != "baseline" and base_ms}}
        ap = ep.get("apriori")
        if ap in ep["cells"] and "baseline" in fin:
            r_train = fin["baseline"]["r_estimate_median"]
            ideal = min(factor_of(ap), r_train)
            sp_est = ep["cells"][ap][i90]["held"]["speedup"]
            pred["apriori"] = {"cell": ap, "ideal": ideal, "r_train": r_train,
                               "speedup_held_90": sp_est,
                               "interval_wholly_above_ideal": sp_est["ci95"][0] > ideal}
        setups[f"r{r}"] = {"cells": side, "predictions": pred}
    return setups


def issue_41_table(network_r5):
    # The issue's table (R about 5, first touch, and held with a margin of 0.3 points):
    # recomputed as a check on the trajectories, not a registered reading.
    issue = []
    r5 = {c: [r for r in v if r["seed"] in SEEDS] for c, v in network_r5.items()}
    for t in (8800, 8900, 8950, 9000):
        row = {"target": t / 100}
        for cell, key in (("before_aug-e2-sb1000", "e2_first_touch"),
                          ("before_aug-e4-sb1000", "e4_first_touch")):
            row[key] = figures(r5["baseline"], r5[cell], t, "first_touch",
                               with_wall=False)["fresh_reduction"]["ratio"]
        b = [held(r["evals"], t, 30) for r in r5["baseline"]]
        c = [held(r["evals"], t, 30) for r in r5["before_aug-e4-sb1000"]]
        bf = [r["evals"][i]["fresh"] if i is not None else r["summary"]["fresh"]
              for r, i in zip(r5["baseline"], b)]
        cf = [r["evals"][i]["fresh"] if i is not None else r["summary"]["fresh"]
              for r, i in zip(r5["before_aug-e4-sb1000"], c)]
        row["e4_held_0.3"] = float(np.median(bf) / np.median(cf))
        issue.append(row)
    return issue


def demo_reference(r5):
    # The demo's reference (change 8): network runs at R about 5, cut at step 2,600, 89%;
    # every seed each cell has (change 12).
    demo_seeds = ", ".join(f"{c} seeds {seeds_text(r5[c])}" for c in DEMO["cells"] if c in r5)
    demo = {"source": f"results/protocol/network-r5 ({demo_seeds}), trajectories cut at step 2,600",
            "seeds": demo_seeds,
            "target": DEMO["target_bp"] / 100, "stop_step": DEMO["stop_step"],
            "note": "runs that do not reach (first touch) or hold (change 8) the target by "
                    "step 2,600 are censored at their last evaluation at or before it",
            "readings": {}}
    for reading in ("first_touch", "held"):
        demo["readings"][reading] = {}
        for cell in DEMO["cells"]:
            if cell not in r5:
                continue
            f = figures(r5["baseline"], r5[cell], DEMO["target_bp"], reading,
                        stop_step=DEMO["stop_step"])
            demo["readings"][reading][cell] = f
    # Lines the demo can print beside its own seed.
    demo["print"] = [f"reference: network runs at R about 5 ({demo_seeds}), cut at step "
                     f"{DEMO['stop_step']:,}, target {DEMO['target_bp'] / 100:.0f}% (median "
                     "[95% interval]; ~ a censored median: a bound)"]
    for reading, cells in demo["readings"].items():
        for c, f in cells.items():
            if c == "baseline":
                demo["print"].append(f"  {READING_LABEL[reading]}: baseline reaches/holds it in "
                                     f"{f['reached']}/{f['runs']}")
                continue
            demo["print"].append(f"  {READING_LABEL[reading]}: {c} {f['reached']}/{f['runs']}, fresh/ "
                                 f"{ratio_text(f['fresh_reduction'])}, speedup "
                                 f"{ratio_text(f['speedup'])}")
    e5 = {r: demo["readings"][r].get(DEMO["cells"][1]) for r in ("first_touch", "held")}
    if all(e5.values()):
        demo["print"].append(
            f"One seed varies more than these medians: {e5['held']['runs'] - e5['held']['reached']}"
            f" of {e5['held']['runs']} e = 5 seeds did not hold 89% by step 2,600, and "
            f"{e5['first_touch']['runs'] - e5['first_touch']['reached']} never reached it.")
    return demo


def experiment_lines(doc, exps, best_bp):
    """table.txt's header and each experiment's tables, final accuracy, step compute
    and change 12's lines."""
    lines = []
    L = lines.append
    L("Reduction and speedup against the target, two readings (docs/protocol.md change 8)")
    L(f"held: the first evaluation >= T from which no later one falls below T - {MARGIN_BP / 100:.2f} "
      f"points (2 sigma, sigma = {SIGMA_BP / 100:.3f} points); thinned: the same on one "
      f"evaluation per {THIN_STEPS} steps; first touch: section 3's reading (old).")
    L("median over each cell's final seeds (listed per experiment; change 12), baseline / cell, "
      "[95% bootstrap interval], ~ = a censored median; reached = runs that reach (first "
      "touch) or hold the target, of the cell's runs.")
    L(f"baseline's best single evaluation: {best_bp / 100:.2f}%")
    for exp, e in doc["experiments"].items():
        L("")
        L(f"== {exp} ==" + (f" (a-priori cell: {e['apriori']})" if e.get("apriori") else ""))
        L("seeds: " + ", ".join(f"{c} {seeds_text(r)}" for c, r in exps[exp].items()
                                if "bs1024" not in c))
        for metric in (["fresh_reduction", "speedup"] if exp != "sweep" else ["fresh_reduction"]):
            for reading in e["readings"]:
                L(f"-- {metric.replace('_', ' ')}, {READING_LABEL[reading]}")
                cells = [c for c in e["cells"] if c != "baseline"]
                L(f"{'target':<8}" + "".join(f"{c[:26]:<28}" for c in cells))
                for i, t in enumerate(doc["targets"]["network" if exp != "sweep" else "sweep"]):
                    row = f"{t:<8.2f}"
                    for c in cells:
                        f = e["cells"][c][i][reading]
                        row += f"{ratio_text(f.get(metric)) + ' ' + str(f['reached']) + '/' + str(f['runs']):<28}"
                    L(row)
                base_rows = e["cells"]["baseline"]
                L("   baseline reached: " + " ".join(
                    f"{r['target']:.2f}:{r[reading]['reached']}/{r[reading]['runs']}"
                    for r in base_rows))
        if "final" in e:
            L(f"-- final validation accuracy (median over seeds, at step 3,900), late swing "
              f"(step >= 1,950; per evaluation, and thinned to one per {THIN_STEPS} steps), "
              "test accuracy at the first touch of 90% (median)")
            for c, v in e["final"].items():
                L(f"  {c:<24} final {100 * v['final_accuracy_median']:.2f}%  sigma "
                  f"{v['sigma_late_points']:.3f} / thinned {v['sigma_late_thinned_points']:.3f} points  "
                  f"test {100 * v['test_accuracy_at_first_touch_90_median']:.2f}%")
            L("-- per cell (medians over seeds): compute per step (ms), R in training, CPU "
              "seconds of training (3,900 steps; - where the run files lack them)")
            for c, v in e["final"].items():
                cpu = v.get("cpu_seconds_median")
                L(f"  {c:<24} {v['compute_ms_per_step_median']:.1f} ms/step  R "
                  f"{v['r_estimate_median']:.2f}  CPU {'-' if cpu is None else f'{cpu:.0f} s'}")
        if "machines" in e:
            lines.extend(machines_text(e["machines"]))
    return lines


def setups_lines(setups):
    """table.txt's lines for the two setups (changes 10 and 11)."""
    lines = []
    L = lines.append
    for key, st in setups.items():
        L("")
        L(f"== the two setups at R about {key[1:]}, 90%: shared cores (section 6) / the train "
          "step on a core of its own (change 10); each setup's own baseline ==")
        for cell, by in st["cells"].items():
            for reading, v in by.items():
                sh = v["shared"] or {}
                L(f"  {cell:<24} {READING_LABEL[reading]:<26} fresh/ shared "
                  f"{ratio_text(sh.get('fresh_reduction'))} split "
                  f"{ratio_text(v['split']['fresh_reduction'])}; speedup shared "
                  f"{ratio_text(sh.get('speedup'))} split {ratio_text(v['split']['speedup'])}")
        p = st["predictions"]
        L("  change 10's predictions: step compute against the split baseline's: " + ", ".join(
            f"{c} {100 * d:+.1f}%" for c, d in p["step_vs_baseline"].items()))
        if "apriori" in p:
            a_ = p["apriori"]
            L(f"  {a_['cell']}: speedup (held, 90%) {ratio_text(a_['speedup_held_90'])} against "
              f"min(e, R) = {a_['ideal']:.2f} (R {a_['r_train']:.2f} in training): interval "
              f"{'wholly above' if a_['interval_wholly_above_ideal'] else 'not wholly above'}")
    return lines


def final_text(v):
    sw = [f"{x:.3f}" if x is not None else "-"
          for x in (v["sigma_late_points"], v["sigma_late_thinned_points"])]
    return (f"final {100 * v['final_accuracy_median']:.2f}%, late swing {sw[0]} / "
            f"thinned {sw[1]}")


def controls_lines(controls, retune):
    """table.txt's lines for the controls of change 9 (A1, C, B, A2)."""
    lines = []
    L = lines.append
    if controls or retune:
        L("")
        L("== controls of change 9 (issue #42), 90% held; a control added after the results "
          "it checks ==")
    if controls:
        for cell, v in controls["A1"].items():
            f = v["figures"]
            L(f"  A1 {cell} (seeds {v['seeds'][0]}-{v['seeds'][-1]}): fresh/ "
              f"{ratio_text(f['fresh_reduction'])}, held {f['reached']}/{f['runs']}: "
              + ("interval wholly above e: refutes A as the whole explanation"
                 if v["refutes_A"] else "interval not wholly above e"))
            L(f"     {final_text(v['final'])}; baseline {final_text(v['baseline_final'])}")
        for cell in ("baseline", "e4"):
            v = controls["C"][cell]
            L(f"  C {cell}: " + ", ".join(
                f"S={S}: {b['held']}/5 hold, median {'~' if b['fresh']['median_censored'] else ''}"
                f"{b['fresh']['median']:.0f}" for S, b in v["budgets"].items())
              + f"; best budget {v['best_budget']}"
              + ("" if v["complete"] else " (not every budget has run)"))
            for S, b in v["budgets"].items():
                L(f"     S={S}: {final_text(b['final'])} (swing from step {int(S) // 2})")
        if "reduction" in controls["C"]:
            L(f"  C: baseline / e = 4 at their best budgets {ratio_text(controls['C']['reduction'])}"
              f": {controls['C']['verdict']}")
    if retune:
        if "B" in retune:
            b = retune["B"]
            L(f"  B (seeds {b['seeds'][0]}-{b['seeds'][-1]}): {b['baseline_cell']} / {b['e4_cell']} "
              f"{ratio_text(b['figures']['fresh_reduction'])}: {b['verdict']}")
            for c, v in b["final"].items():
                L(f"     {c}: {final_text(v)}")
        if "A2" in retune:
            a2 = retune["A2"]
            L(f"  A2 batch augmentation (seeds {a2['seeds'][0]}-{a2['seeds'][-1]}): baseline / "
              f"batchaug-e2-bs256 {ratio_text(a2['figures']['fresh_reduction'])}: " +
              ("supports A" if a2["supports_A"] else "interval reaches 1 or lies below"))
            L(f"     {final_text(a2['final'])}; baseline {final_text(a2['baseline_final'])}")
    return lines


def demo_and_check_lines(doc, demo, issue):
    """table.txt's lines for the demo's reference and the checks."""
    lines = []
    L = lines.append
    L("")
    L(f"== demo reference (results/protocol/targets/demo_reference.json): network-r5 "
      f"({demo['seeds']}), cut at step 2,600, target 89% ==")
    for reading, cells in demo["readings"].items():
        for c, f in cells.items():
            L(f"  {READING_LABEL[reading]:<32} {c:<22} reached {f['reached']}/{f['runs']}  fresh "
              f"{'~' if f['fresh']['median_censored'] else ''}{f['fresh']['median']:.0f} "
              f"[{f['fresh']['ci95'][0]:.0f}-{f['fresh']['ci95'][1]:.0f}]  fresh/ "
              f"{ratio_text(f['fresh_reduction']) if c != 'baseline' else '-'}  speedup "
              f"{ratio_text(f['speedup']) if c != 'baseline' else '-'}")
    L("")
    L("== checks ==")
    for exp, ch in doc["checks"].items():
        L(f"  {exp}: {ch['figures_checked']} figures of the committed table (90%, first touch) "
          f"recomputed, {len(ch['mismatches'])} differ")
        for m in ch["mismatches"]:
            L(f"    {m}")
    L("  issue #41's table (network-r5, medians, baseline / cell), recomputed:")
    for r in issue:
        L(f"    {r['target']:.2f}%: e=2 first touch {r['e2_first_touch']:.2f}x, e=4 first touch "
          f"{r['e4_first_touch']:.2f}x, e=4 held with a 0.3-point margin {r['e4_held_0.3']:.2f}x")
    L("CPU-seconds: in the run files of trainers from commit 53ff043 on (the split setup); "
      "the older runs record train-step compute and wait time only. Test accuracy: only at "
      "the first touch of 90%.")
    return lines


# --- main -----------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="results/protocol")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--budgets-choice", action="store_true",
                    help="print change 13's chosen budget per cell as JSON and exit")
    a = ap.parse_args(argv)
    if a.budgets_choice:
        choice = budgets_choice(a.root)
        print(json.dumps({c: v["best_budget"] if v["complete"] else None for c, v in choice.items()}))
        return 0
    out_dir = a.out or os.path.join(a.root, "targets")
    os.makedirs(out_dir, exist_ok=True)

    doc = {"rule": {"reading": "held", "margin_points": MARGIN_BP / 100,
                    "sigma_points": SIGMA_BP / 100, "k": 2, "thin_steps": THIN_STEPS,
                    "registered": "docs/protocol.md change 8"},
           "method": "median over each cell's final seeds (change 12: the network runs' "
                     "baseline, a-priori e and e = 4 on seeds 1-10, the other cells on 1-5, "
                     "the split setup and the sweep on 1-5); a run that does not reach (first touch) or "
                     "hold the target counts at its budget (censored; ~ when a median is); "
                     "95% percentile bootstrap, 10,000 resamples, seed 20190715, "
                     "ratios resample baseline and cell independently (section 5)",
           "experiments": {}, "checks": {}}
    csv_rows = ["experiment,cell,target,reading,reached,runs,fresh_median,fresh_median_censored,"
                "fresh_reduction,fresh_reduction_lo,fresh_reduction_hi,fresh_reduction_censored,"
                "wall_median,speedup,speedup_lo,speedup_hi,speedup_censored"]

    exps = {}
    for exp in NETWORK_EXPS + ["sweep"]:
        d = os.path.join(a.root, exp)
        if os.path.isdir(os.path.join(d, "cells")):
            exps[exp] = load_all_seeds(d)

    # The grid of targets: from 87.00% to the baseline's best evaluation (network runs).
    best_bp = max(bp(e["accuracy"]) for r in exps["network-r5"]["baseline"] for e in r["evals"])
    top_bp = best_bp // TARGET_STEP_BP * TARGET_STEP_BP
    net_targets = list(range(TARGET_FROM_BP, top_bp + 1, TARGET_STEP_BP))
    sweep_targets = list(range(TARGET_FROM_BP, 9000 + 1, TARGET_STEP_BP))
    doc["targets"] = {"network": [t / 100 for t in net_targets],
                      "sweep": [t / 100 for t in sweep_targets],
                      "baseline_best_evaluation": best_bp / 100}

    for exp, runs in exps.items():
        targets = net_targets if exp.startswith("network") else sweep_targets
        doc["experiments"][exp] = experiment_section(a.root, exp, runs, targets, csv_rows)
        checked, bad = check_against_committed(os.path.join(a.root, exp), runs)
        doc["checks"][exp] = {"figures_checked": checked, "mismatches": bad}
    doc["setups"] = setups_section(doc["experiments"], net_targets)

    controls = controls_section(a.root)
    if controls:
        doc["controls"] = controls
    retune = retune_section(a.root)
    if retune:
        doc["retune"] = retune
    budgets = budgets_section(a.root) if controls else None
    if budgets:
        doc["budgets"] = budgets
    issue = issue_41_table(exps["network-r5"])
    doc["issue_41_table_check"] = issue
    demo = demo_reference(exps["network-r5"])
    with open(os.path.join(out_dir, "demo_reference.json"), "w") as f:
        json.dump(demo, f, indent=1)
        f.write("\n")

    lines = (experiment_lines(doc, exps, best_bp) + setups_lines(doc["setups"])
             + controls_lines(controls, retune) + budgets_lines(budgets)
             + demo_and_check_lines(doc, demo, issue))
    doc["plots"] = write_plots(out_dir, doc, draw=not a.no_plots)
    lines.append(f"plots: {doc['plots']}")

    with open(os.path.join(out_dir, "table.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "targets.csv"), "w") as f:
        f.write("\n".join(csv_rows) + "\n")
    with open(os.path.join(out_dir, "targets.json"), "w") as f:
        # Compact: half the bytes of an indented file (results/ stays small); jq reads it.
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print("\n".join(lines))
    bad = sum(len(c["mismatches"]) for c in doc["checks"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
