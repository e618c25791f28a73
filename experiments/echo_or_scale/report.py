"""The echo-or-scale comparison's tables (docs/echo_or_scale_protocol.md sections 4, 6, 7),
from the run files alone.

    python3 -m experiments.echo_or_scale.report [DIR] [--no-plots]

DIR (default results/echo_or_scale) holds one folder per setting (grid-n1, grid-n2,
grid-n4, paper-n1, workers-only, echo-only, echo-or-scale-p0/-p1/-p4, and the policies run
again on the corrected code of the protocol's change 3: workers-only-c3, ...), each with the
experiment's runs under cells/ and the dispatcher's records of each run under
service/<cell>/seed-N/ (status.jsonl, times.json): unpacked from the setting's
runs.jsonl.xz (experiments/archive.py), which the report unpacks first where a folder holds
an archive, as it does results/protocol/network-r5's in-process runs. Writes DIR/table.txt,
DIR/results.json and DIR/plots (each price's cost per setting, each policy run's workers
and echo cap over time; drawn when gnuplot is there).

Time to target: the wall-clock seconds of the evaluation that reaches the target (first
touch) or holds it (held, the image protocol's rule), a run that does not counting at its
whole run, censored. Cost to target at worker price p (per hour, a trainer-hour costing
1): T + p x the worker-seconds within [start, start + T], start the trainer process's
start, each launched worker counted from its launch (the poll's time less its age) to its
exit (launch + ran_s) or the run's end; in trainer-minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import archive, runfiles, stats
from ..protocol import plots, readings
from ..runfiles import Json, Run

TARGET_BP = 9000
PRICES = [0, 1, 4]
GRID = [(n, e) for n in (1, 2, 4) for e in (1, 2, 4)]
POLICIES = ["workers-only", "echo-only", "echo-or-scale"]
# The policies' runs: the registered code's, and those of the protocol's change 3 (the
# measurements corrected), whose settings' names end in "-c3".
CODES = {"": "registered code", "-c3": "change 3"}
READINGS = ["first_touch", "held"]


ADAPTIVE_CELL = "auto-m4-sb1000"  # echo only's and echo or scale's cell (run.py's ADAPTIVE_ID)


def cell_id(e: int) -> str:
    return f"before_aug-e{e}-sb1000"


def read_status(status_path: str, end: float) -> Tuple[List[Tuple[float, float]], List[Tuple[float, int]]]:
    """From a run's status log: (start, stop) of every launched worker process, and the
    dispatcher's target number of workers at each of its changes [(t, target)]."""
    spans: Dict[int, List[Optional[float]]] = {}
    targets: List[Tuple[float, int]] = []
    with open(status_path) as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
                for index, _host, _state, age, ran, _worker in rec["launched"]:
                    span = spans.setdefault(index, [None, None])
                    start = rec["t"] - age
                    span[0] = start if span[0] is None else min(span[0], start)
                    if ran is not None:
                        span[1] = span[0] + ran
                target = rec.get("target")
                if target is not None and (not targets or targets[-1][1] != target):
                    targets.append((float(rec["t"]), int(target)))
            except (ValueError, KeyError, TypeError) as e:
                raise runfiles.RunFileError(f"{status_path}: line {n}: not a status record ({e})") from e
    return [(s, stop if stop is not None else end) for s, stop in spans.values() if s is not None], targets


def worker_seconds(spans: Sequence[Tuple[float, float]], t0: float, t1: float) -> float:
    return sum(max(0.0, min(stop, t1) - max(start, t0)) for start, stop in spans)


def observe(setting_dir: str, cell: str, run: Run, reading: str) -> Json:
    """One run at the target: T, whether censored, fresh, and its workers' seconds."""
    o = readings.observe(run, TARGET_BP, reading)
    sdir = os.path.join(setting_dir, "service", cell, f"seed-{run['seed']}")
    times = runfiles.read_json(os.path.join(sdir, "times.json"), ("trainer_start", "trainer_end"))
    spans, targets = read_status(os.path.join(sdir, "status.jsonl"), times["trainer_end"])
    t0 = times["trainer_start"]
    w = worker_seconds(spans, t0, t0 + o["wall"])
    s = run["summary"]
    return {"seed": run["seed"], "T": o["wall"], "censored": o["censored"], "fresh": o["fresh"],
            "step": o["step"], "worker_seconds": w, "mean_workers": w / o["wall"] if o["wall"] > 0 else 0.0,
            "launches": len(spans), "achieved_echo": s.get("achieved_echo"), "r": s.get("r_estimate"),
            "targets": [[max(0.0, round(t - t0, 1)), n] for t, n in targets],  # a poll may precede t0
            "decisions": (s.get("pipeline_scale") or {}).get("decisions", [])}


def cost(o: Json, price: float) -> float:
    return (o["T"] + price * o["worker_seconds"]) / 60.0


def median_of(obs: Sequence[Any], key: Callable[[Any], float]) -> Optional[stats.MedianEstimate]:
    return stats.estimate_median([(key(o), o["censored"]) for o in obs])


def unpack_runs(*folders: str) -> None:
    """Each folder's archived run files written beside its archive (a folder without one is
    left as it is): scripts/run_files.sh's unpack_runs, for the report's own entry."""
    for folder in folders:
        if os.path.isfile(os.path.join(folder, archive.ARCHIVE)):
            archive.unpack(folder)


def unpack_settings(dir_: str) -> None:
    """The archived runs of every setting folder under DIR."""
    unpack_runs(*(os.path.join(dir_, name) for name in sorted(os.listdir(dir_))))


def load(dir_: str, setting: str) -> Dict[str, List[Run]]:
    path = os.path.join(dir_, setting)
    if not os.path.isdir(os.path.join(path, "cells")):
        return {}
    return runfiles.load_all_seeds(path, readings.SUMMARY_FIELDS, readings.EVAL_FIELDS)


def settings(dir_: str, reading: str) -> Dict[str, List[Json]]:
    """{label: its runs observed}: the grid's cells "n1-e2", the policies."""
    out: Dict[str, List[Json]] = {}
    for n in (1, 2, 4):
        runs = load(dir_, f"grid-n{n}")
        for e in (1, 2, 4):
            if cell_id(e) in runs:
                out[f"n{n}-e{e}"] = [observe(os.path.join(dir_, f"grid-n{n}"), cell_id(e), r, reading)
                                     for r in runs[cell_id(e)]]
    policies = (("workers-only", cell_id(1)), ("echo-only", ADAPTIVE_CELL)) + tuple(
        (f"echo-or-scale-p{p}", ADAPTIVE_CELL) for p in PRICES)
    for name, cell in (("paper-n1", cell_id(5)),) + tuple((n + code, c) for code in CODES for n, c in policies):
        found = load(dir_, name).get(cell)
        if found:
            out[name if name != "paper-n1" else "n1-e5"] = [observe(os.path.join(dir_, name), cell, r, reading)
                                                           for r in found]
    return out


def price_table(obs: Dict[str, List[Json]], price: float) -> Json:
    """At one price: every grid cell's and policy's median cost, the best fixed setting,
    and the goals' ratios."""
    rows: Json = {}
    for label, o in obs.items():
        if label.startswith("echo-or-scale-p") and label not in (f"echo-or-scale-p{price}{c}" for c in CODES):
            continue  # echo or scale is read at its own price only
        if label == "n1-e5":
            continue  # the data service's check, not a setting of this comparison
        rows[label] = {"cost": median_of(o, lambda x: cost(x, price)), "T": median_of(o, lambda x: x["T"] / 60.0),
                       "by_seed": [round(cost(x, price), 2) for x in o], "censored": sum(x["censored"] for x in o)}
    grid = {k: v for k, v in rows.items() if k.startswith("n") and v["cost"]}
    best = min(grid, key=lambda k: grid[k]["cost"]["median"]) if grid else None
    out: Json = {"price": price, "rows": rows, "best_fixed": best}
    for code in CODES:  # each code's echo or scale against the grid and its own code's other policies
        eos = obs.get(f"echo-or-scale-p{price}{code}")
        if best and eos:
            b = [(cost(x, price), x["censored"]) for x in obs[best]]
            c = [(cost(x, price), x["censored"]) for x in eos]
            out[f"eos{code}_over_best"] = stats.estimate_ratio(c, b)
            for other in ("workers-only", "echo-only"):
                if other + code in obs:
                    out[f"eos{code}_over_{other}"] = stats.estimate_ratio(
                        c, [(cost(x, price), x["censored"]) for x in obs[other + code]])
    return out




def est_text(e: Optional[Json], fmt: str = "{:.1f}") -> str:
    if not e:
        return "-"
    m = ("~" if e.get("median_censored") else "") + fmt.format(e["median"])
    return f"{m} [{fmt.format(e['ci95'][0])}-{fmt.format(e['ci95'][1])}]"


def ratio_text(e: Optional[Json]) -> str:
    if not e:
        return "-"
    return f"{e['ratio']:.2f} [{e['ci95'][0]:.2f}-{e['ci95'][1]:.2f}]" + (" (censored)" if e["censored"] else "")


def in_process(root: str) -> Json:
    """The image protocol's network runs at R about 5 in one process (results/protocol/
    network-r5): the baseline's and e = 5's median wall time to the target, both readings."""
    path = os.path.join(root, "results", "protocol", "network-r5")
    unpack_runs(path)
    if not os.path.isdir(os.path.join(path, "cells")):
        return {}
    runs = readings.load_all_seeds(path)
    out: Json = {}
    for cell in ("baseline", cell_id(5)):
        if cell in runs:
            out[cell] = {r: median_of([readings.observe(x, TARGET_BP, r) for x in runs[cell]], lambda x: x["wall"] / 60.0)
                         for r in READINGS}
            out[cell]["seeds"] = readings.seeds_text(runs[cell])
    return out


def spread_text(values: Sequence[Optional[float]], fmt: str) -> str:
    """The median [min-max] of the values given (None left out), or "-"."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return "-"
    return f"{fmt.format(stats.median(v))} [{fmt.format(v[0])}-{fmt.format(v[-1])}]"


def beside_lines(obs: Dict[str, List[Json]]) -> List[str]:
    """Section 4's figures beside the cost, a setting a line, and each policy run's
    workers over time and decisions."""
    lines = ["-- beside each setting: fresh examples and steps to target, workers on average until then, "
             "achieved echo and R in training; median [min-max] over the seeds"]
    for label, o in obs.items():
        cens = sum(x["censored"] for x in o)
        lines.append(f"  {label:20s} fresh {spread_text([x['fresh'] for x in o], '{:,.0f}'):28s} "
                     f"steps {spread_text([x['step'] for x in o], '{:.0f}'):18s} "
                     f"workers {spread_text([x['mean_workers'] for x in o], '{:.2f}'):18s} "
                     f"echo {spread_text([x['achieved_echo'] for x in o], '{:.2f}'):18s} "
                     f"R {spread_text([x['r'] for x in o], '{:.2f}')}"
                     + (f"  ({cens} of {len(o)} censored)" if cens else ""))
    for label, o in obs.items():
        if label.startswith("n"):
            continue
        lines.append(f"-- {label}: each run's workers (the dispatcher's target, s from the trainer's start) "
                     "and the policy's decisions")
        for x in o:
            steps = " -> ".join(f"{n} at {t:.0f} s" for t, n in x["targets"])
            lines.append(f"  seed {x['seed']}: T {x['T']:.0f} s, workers {steps}, {x['launches']} launched")
            lines.extend(f"    {d}" for d in x["decisions"])
    return lines


DECISION = re.compile(r"^\S+ ([0-9.]+) s: workers \d+ -> \d+(?:, echo cap \d+ -> (\d+))?")


def echo_caps(decisions: Sequence[str]) -> List[Tuple[float, int]]:
    """(t, the echo cap set) of each decision line that sets one."""
    out: List[Tuple[float, int]] = []
    for d in decisions:
        m = DECISION.match(d)
        if m and m.group(2):
            out.append((float(m.group(1)), int(m.group(2))))
    return out


def write_plots(dir_: str, result: Json, draw: bool = True) -> str:
    """DIR/plots: the cost to target of every setting at each price and reading (median,
    95% interval), and each policy run's workers and echo cap over time."""
    pdir = os.path.join(dir_, "plots")
    os.makedirs(pdir, exist_ok=True)
    gp = plots.gnuplot_script("experiments/echo_or_scale/report.py")
    count = 0
    for reading in READINGS:
        for t in result[reading]["prices"]:
            name = f"cost_p{t['price']}_{reading}"
            with open(os.path.join(pdir, f"{name}.dat"), "w") as f:
                for i, (label, r) in enumerate(t["rows"].items()):
                    if r["cost"]:
                        c = r["cost"]
                        f.write(f"{i} {label} {c['median']:.6g} {c['ci95'][0]:.6g} {c['ci95'][1]:.6g}\n")
            gp += [f"set output \"{name}.\".fmt",
                   f"set title \"cost to 90% at a worker price of {t['price']} (a trainer-hour 1), "
                   f"{'first touch' if reading == 'first_touch' else 'held'}: median over 3 seeds, "
                   f"95% bootstrap interval; best fixed {t['best_fixed']}\"",
                   "set xlabel \"setting (grid: workers n, echo e; the policies)\"",
                   "set ylabel \"trainer-minutes\"", "set xrange [-0.7:*]", "set yrange [0:*]",
                   "set style fill solid 0.4", "set boxwidth 0.6", "set xtics rotate by -30",
                   f"plot \"{name}.dat\" using 1:3:xtic(2) with boxes notitle, "
                   f"\"{name}.dat\" using 1:3:4:5 with yerrorbars lc rgb \"black\" pt 7 notitle",
                   "set xtics norotate", "set style fill empty", "set xrange [*:*]"]
            count += 1
    for label, o in result["first_touch"]["runs"].items():
        if label.startswith("n"):
            continue
        name = f"workers_{label}"
        series: List[str] = []
        with open(os.path.join(pdir, f"{name}.dat"), "w") as f:
            for x in o:
                end = x["T"]
                f.write(f"# seed {x['seed']}: workers\n")
                for tt, n in x["targets"] + [[end, x["targets"][-1][1] if x["targets"] else 0]]:
                    f.write(f"{tt:.1f} {n}\n")
                f.write("\n\n")
                series.append(f"seed {x['seed']} workers")
                caps = echo_caps(x["decisions"])
                if caps:
                    f.write(f"# seed {x['seed']}: echo cap\n")
                    for tt, c in caps + [(end, caps[-1][1])]:
                        f.write(f"{tt:.1f} {c}\n")
                    f.write("\n\n")
                    series.append(f"seed {x['seed']} echo cap")
        parts = [f"\"{name}.dat\" index {i} using 1:2 with steps lw 2 title \"{s}\"" for i, s in enumerate(series)]
        gp += [f"set output \"{name}.\".fmt",
               f"set title \"{label}: the workers the dispatcher is asked for, and the echo cap set, "
               "until the target (first touch)\"",
               "set xlabel \"seconds from the trainer's start\"", "set ylabel \"workers, echo cap\"",
               "set xrange [0:*]", "set yrange [0:5]", "plot " + ", \\\n  ".join(parts), "set xrange [*:*]"]
        count += 1
    return plots.gnuplot_draw(pdir, gp, count, draw)


def text(result: Json) -> str:
    lines: List[str] = []
    for reading in READINGS:
        lines.append(f"== read by {'the first touch' if reading == 'first_touch' else 'the held rule'}")
        for t in result[reading]["prices"]:
            lines.append(f"-- worker price {t['price']} (a trainer-hour costs 1): cost to target, trainer-minutes, "
                         f"median [95% interval] (time to target in minutes; each seed's cost)")
            for label, r in t["rows"].items():
                mark = "  <- best fixed" if label == t["best_fixed"] else ""
                lines.append(f"  {label:20s} {est_text(r['cost']):24s} T {est_text(r['T']):22s} "
                             f"{r['by_seed']}{' censored ' + str(r['censored']) if r['censored'] else ''}{mark}")
            for code in CODES:
                for other in ("best", "workers-only", "echo-only"):
                    k = f"eos{code}_over_{other}"
                    if k in t:
                        lines.append(f"  echo or scale over {other.replace('-', ' ')} ({CODES[code]}): "
                                     f"{ratio_text(t[k])}")
        lines.extend(beside_lines(result[reading]["runs"]))
        paper = result[reading]["paper"]
        if paper:
            lines.append("-- the data service in the paper's setting: time to target, minutes")
            for label, e in paper.items():
                lines.append(f"  {label:28s} {est_text(e)}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description="The echo-or-scale comparison's tables and plots.")
    ap.add_argument("dir", nargs="?", default=os.path.join("results", "echo_or_scale"))
    ap.add_argument("--no-plots", action="store_true", help="write the plots' data and script, draw nothing")
    a = ap.parse_args(argv[1:])
    dir_ = a.dir
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    unpack_settings(dir_)  # once: both readings read the same run files
    proc = in_process(root)
    result: Json = {}
    for reading in READINGS:
        obs = settings(dir_, reading)
        paper = {f"service, {k}": median_of(obs[k], lambda x: x["T"] / 60.0) for k in ("n1-e1", "n2-e1", "n1-e5")
                 if k in obs}
        for cell, v in proc.items():
            paper[f"in process, {cell} (seeds {v['seeds']})"] = v[reading]
        result[reading] = {"prices": [price_table(obs, p) for p in PRICES], "paper": paper,
                           "runs": obs}
    with open(os.path.join(dir_, "results.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    t = text(result)
    with open(os.path.join(dir_, "table.txt"), "w") as f:
        f.write(t)
    sys.stdout.write(t + write_plots(dir_, result, draw=not a.no_plots) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
