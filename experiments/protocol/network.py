"""One experiment's figures against the target (targets.json's "experiments" and
table.txt's tables): every cell against the baseline at every target under each
reading; for the network runs also each cell's final accuracy, late swing, step compute
and R, the reading per machine of the seeds run on two machines, and the two setups
(shared cores, and the train step on a core of its own) side by side.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

from .. import runfiles, stats
from ..runfiles import Json, Run
from .readings import (MARGIN_BP, READING_LABEL, READINGS, SIGMA_BP, THIN_STEPS, factor_of, figures,
                       final_and_swing, points_text, ratio_text, seeds_text)

# The network runs' seeds from two machines: seeds 1-5 ran on 2026-12-01's machine, 6-10
# on 2026-12-05's, whose train step is about 20% faster, at the same bandwidth.
MACHINES = {"seeds 1-5 (2026-12-01)": list(range(1, 6)),
            "seeds 6-10 (2026-12-05)": list(range(6, 11))}


def machines_section(runs: Dict[str, List[Run]], apriori: str) -> Optional[Json]:
    """The wall-clock reading per machine at 90%: for the a-priori cell and e = 4 (the
    cells with seeds on both machines), the speedup and reduction under both readings on
    seeds 1-10 and on each machine's seeds alone, each beside its baseline's median R in
    training and the ideal min(e, R); and whether the two machines' intervals of the
    a-priori cell's held speedup overlap (if not, the pooled figure is not the headline).
    None before the baseline has seeds on both machines."""
    base = runs.get("baseline", [])
    sets = {"seeds 1-10 (both machines)": sorted({r["seed"] for r in base}), **MACHINES}
    if any(not set(s) <= {r["seed"] for r in base} for s in MACHINES.values()):
        return None
    out: Json = {"registered": "docs/protocol.md: ten seeds from two machines", "target": 90.0, "cells": {}}
    for cell in dict.fromkeys([apriori, "before_aug-e4-sb1000"]):
        if cell not in runs or len(runs[cell]) < len(base):
            continue
        e = factor_of(cell)
        by: Json = {}
        for name, seeds in sets.items():
            b = [r for r in base if r["seed"] in seeds]
            c = [r for r in runs[cell] if r["seed"] in seeds]
            r_train = stats.median([r["summary"]["r_estimate"] for r in b])
            by[name] = {"seeds": seeds, "r_train_baseline": r_train, "ideal": min(e, r_train),
                        **{reading: figures(b, c, 9000, reading)
                           for reading in ("held", "first_touch")}}
        a, b_ = (by[m]["held"]["speedup"]["ci95"] for m in MACHINES)
        out["cells"][cell] = {"factor": e, "by_seeds": by,
                              "held_speedup_intervals_overlap": a[0] <= b_[1] and b_[0] <= a[1]}
    if apriori in out["cells"]:
        out["pooled_is_headline"] = out["cells"][apriori]["held_speedup_intervals_overlap"]
    return out


def machines_text(m: Json) -> List[str]:
    """table.txt's lines for machines_section's result."""
    out = ["-- ten seeds from two machines: 90%, on seeds 1-10 and on each machine's seeds; R = the baseline's "
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
        out.append("  headline: " + ("the pooled seeds 1-10" if m["pooled_is_headline"]
                                                 else "each machine's figure, the lower first"))
    return out


_NO_RATIO: List[object] = ["", "", "", ""]


def _ratio_fields(e: Optional[Json]) -> List[object]:
    """A ratio's four CSV fields: the ratio, its interval, 1 when censored; empty for none."""
    if e is None:
        return _NO_RATIO
    return [f"{e['ratio']:.4g}", f"{e['ci95'][0]:.4g}", f"{e['ci95'][1]:.4g}", int(e["censored"])]


def csv_row(exp: str, cell: str, t: int, reading: str, f: Json) -> str:
    """targets.csv's row of one cell at one target and reading."""
    fr, sp = f.get("fresh_reduction"), f.get("speedup")
    fields: List[object] = [
        exp, cell, f"{t / 100:.2f}", reading, f["reached"], f["runs"],
        f"{f['fresh']['median']:.6g}", int(f["fresh"]["median_censored"]),
        *(_ratio_fields(fr) if cell != "baseline" else _NO_RATIO),
        f"{f['wall']['median']:.6g}" if "wall" in f else "",
        *(_ratio_fields(sp) if cell != "baseline" else _NO_RATIO)]
    return ",".join(str(x) for x in fields)


def cell_final(cr: Sequence[Run]) -> Json:
    """A network cell's final accuracy and late swing, test accuracy, step compute, R in
    training and (where its run files have it) CPU time, medians over its seeds."""
    test = [r["summary"].get("test_accuracy") for r in cr]
    out: Json = {
        **final_and_swing(cr, 1950),
        "test_accuracy_at_first_touch_90_median":
            stats.median([t for t in test if t is not None]) if None not in test else float("nan"),
        # Each cell's step compute (predicted within 5% of the baseline's), R in training
        # (r_estimate) beside it.
        "compute_ms_per_step_median": stats.median(
            [1000 * r["summary"]["compute_seconds"] / r["summary"]["steps"] for r in cr]),
        "r_estimate_median": stats.median([r["summary"]["r_estimate"] for r in cr]),
    }
    # The process's CPU time over training (snapshots evaluated after it), recorded by
    # trainers from commit 53ff043 on: every run goes to 3,900 steps.
    if all("cpu_seconds" in r["summary"] for r in cr):
        out["cpu_seconds_median"] = stats.median([r["summary"]["cpu_seconds"] for r in cr])
        out["cpu_seconds_by_seed"] = [r["summary"]["cpu_seconds"] for r in cr]
    return out


def experiment_section(root: str, exp: str, runs: Dict[str, List[Run]], targets: Sequence[int],
                       csv_rows: List[str]) -> Json:
    """One experiment's figures at every target and reading (rows appended to
    csv_rows); for the network runs also the a-priori cell, each cell's final accuracy,
    late swing, step compute and R, and the reading per machine."""
    network = exp.startswith("network")
    readings = READINGS if network else ["first_touch"]
    base = runs["baseline"]
    cells = {}
    for cell, cr in runs.items():
        if "bs1024" in cell:
            continue
        rows = []
        for t in targets:
            row: Json = {"target_bp": t, "target": t / 100}
            for reading in readings:
                row[reading] = figures(base, cr, t, reading, with_wall=network)
                csv_rows.append(csv_row(exp, cell, t, reading, row[reading]))
            rows.append(row)
        cells[cell] = rows
    e: Json = {"cells": cells, "readings": readings}
    if network:
        cal = os.path.join(root, exp, "calibration.txt")
        factor = runfiles.read_calibration(cal).get("factor") if os.path.exists(cal) else None
        if factor is not None:
            e["apriori"] = f"before_aug-e{int(factor)}-sb1000"
        # Final accuracy and late swing per cell, beside the baseline's.
        e["final"] = {cell: cell_final(cr) for cell, cr in runs.items()}
        if e.get("apriori"):
            m = machines_section(runs, e["apriori"])
            if m:
                e["machines"] = m
    return e


def setups_section(experiments: Json, net_targets: Sequence[int]) -> Json:
    """The split setup beside the shared one at 90%, and its predictions (step compute
    within 5% of the baseline's; the a-priori cell's speedup at or below min(e, R) with R
    the split baseline's in training)."""
    setups = {}
    i90 = list(net_targets).index(9000) if 9000 in net_targets else None
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
        pred: Json = {"step_vs_baseline": {c: v["compute_ms_per_step_median"] / base_ms - 1
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


def setups_lines(setups: Json) -> List[str]:
    """table.txt's lines for the two setups."""
    lines = []
    for key, st in setups.items():
        lines.append("")
        lines.append(f"== the two setups at R about {key[1:]}, 90%: shared cores (section 6) / the train "
                     "step on a core of its own (the CPU split); each setup's own baseline ==")
        for cell, by in st["cells"].items():
            for reading, v in by.items():
                sh = v["shared"] or {}
                lines.append(f"  {cell:<24} {READING_LABEL[reading]:<26} fresh/ shared "
                             f"{ratio_text(sh.get('fresh_reduction'))} split "
                             f"{ratio_text(v['split']['fresh_reduction'])}; speedup shared "
                             f"{ratio_text(sh.get('speedup'))} split {ratio_text(v['split']['speedup'])}")
        p = st["predictions"]
        lines.append("  the CPU split's predictions: step compute against the split baseline's: " + ", ".join(
            f"{c} {100 * d:+.1f}%" for c, d in p["step_vs_baseline"].items()))
        if "apriori" in p:
            a_ = p["apriori"]
            lines.append(f"  {a_['cell']}: speedup (held, 90%) {ratio_text(a_['speedup_held_90'])} against "
                         f"min(e, R) = {a_['ideal']:.2f} (R {a_['r_train']:.2f} in training): interval "
                         f"{'wholly above' if a_['interval_wholly_above_ideal'] else 'not wholly above'}")
    return lines


def metric_lines(doc: Json, exp: str, e: Json) -> List[str]:
    """table.txt's table of each metric and reading of one experiment, target by target."""
    lines = []
    for metric in (["fresh_reduction", "speedup"] if exp != "sweep" else ["fresh_reduction"]):
        for reading in e["readings"]:
            lines.append(f"-- {metric.replace('_', ' ')}, {READING_LABEL[reading]}")
            cells = [c for c in e["cells"] if c != "baseline"]
            lines.append(f"{'target':<8}" + "".join(f"{c[:26]:<28}" for c in cells))
            for i, t in enumerate(doc["targets"]["network" if exp != "sweep" else "sweep"]):
                row = f"{t:<8.2f}"
                for c in cells:
                    f = e["cells"][c][i][reading]
                    row += f"{ratio_text(f.get(metric)) + ' ' + str(f['reached']) + '/' + str(f['runs']):<28}"
                lines.append(row)
            lines.append("   baseline reached: " + " ".join(
                f"{r['target']:.2f}:{r[reading]['reached']}/{r[reading]['runs']}"
                for r in e["cells"]["baseline"]))
    return lines


def final_lines(e: Json) -> List[str]:
    """table.txt's lines of a network experiment's final accuracy, swing, test accuracy,
    step compute, R and CPU time per cell."""
    lines = [f"-- final validation accuracy (median over seeds, at step 3,900), late swing "
             f"(step >= 1,950; per evaluation, and thinned to one per {THIN_STEPS} steps), "
             "test accuracy at the first touch of 90% (median)"]
    for c, v in e["final"].items():
        lines.append(f"  {c:<24} final {100 * v['final_accuracy_median']:.2f}%  sigma "
                     f"{points_text(v['sigma_late_points'])} / thinned "
                     f"{points_text(v['sigma_late_thinned_points'])} points  "
                     f"test {100 * v['test_accuracy_at_first_touch_90_median']:.2f}%")
    lines.append("-- per cell (medians over seeds): compute per step (ms), R in training, CPU "
                 "seconds of training (3,900 steps; - where the run files lack them)")
    for c, v in e["final"].items():
        cpu = v.get("cpu_seconds_median")
        lines.append(f"  {c:<24} {v['compute_ms_per_step_median']:.1f} ms/step  R "
                     f"{v['r_estimate_median']:.2f}  CPU {'-' if cpu is None else f'{cpu:.0f} s'}")
    return lines


def experiment_lines(doc: Json, exps: Dict[str, Dict[str, List[Run]]], best_bp: int) -> List[str]:
    """table.txt's header and each experiment's tables, final accuracy, step compute
    and per-machine lines."""
    lines = [
        "Reduction and speedup against the target, two readings (docs/protocol.md: the held reading)",
        f"held: the first evaluation >= T from which no later one falls below T - {MARGIN_BP / 100:.2f} "
        f"points (2 sigma, sigma = {SIGMA_BP / 100:.3f} points); thinned: the same on one "
        f"evaluation per {THIN_STEPS} steps; first touch: section 3's reading (old).",
        "median over each cell's final seeds (listed per experiment), baseline / cell, "
        "[95% bootstrap interval], ~ = a censored median; reached = runs that reach (first "
        "touch) or hold the target, of the cell's runs.",
        f"baseline's best single evaluation: {best_bp / 100:.2f}%"]
    for exp, e in doc["experiments"].items():
        lines.append("")
        lines.append(f"== {exp} ==" + (f" (a-priori cell: {e['apriori']})" if e.get("apriori") else ""))
        lines.append("seeds: " + ", ".join(f"{c} {seeds_text(r)}" for c, r in exps[exp].items()
                                           if "bs1024" not in c))
        lines += metric_lines(doc, exp, e)
        if "final" in e:
            lines += final_lines(e)
        if "machines" in e:
            lines.extend(machines_text(e["machines"]))
    return lines
