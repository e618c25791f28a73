"""The plots of results/protocol/targets/plots/: each network experiment's fresh-example
reduction and speedup against the target under each reading, and its headline cells,
as gnuplot data files and one plots.gp (drawn to PNG and SVG when gnuplot is there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import List

from ..runfiles import Json
from .readings import READING_LABEL, READINGS

NETWORK_EXPS = ["network-r5", "network-r2", "network-split-r5", "network-split-r2"]


def target_plots(gp: List[str], names: List[str], pdir: str, exp: str, e: Json) -> None:
    """The plots of each metric and reading against the target for one network experiment:
    their data files in pdir, their gnuplot lines appended to gp, their names to names."""
    for metric, ylabel in (("fresh_reduction", "fresh-example reduction (baseline / cell)"),
                           ("speedup", "wall-clock speedup (baseline / cell)")):
        for reading in READINGS:
            name = f"{metric}_{exp}_{reading}"
            dat = f"{name}.dat"
            series: List[str] = []
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
            parts: List[str] = []
            for i, cell in enumerate(series):
                parts.append(f"\"{dat}\" index {i} using 1:2:3:4 with yerrorlines lc {i + 1} "
                             f"title \"{cell}\"")
            for k in (2, 4, 5):
                parts.append(f"{k} with lines dt 2 lc rgb \"black\" notitle")
            gp.append("plot " + ", \\\n  ".join(parts))
            names.append(name)


def headline_plot(gp: List[str], names: List[str], pdir: str, exp: str, e: Json) -> None:
    """The headline plot of one network experiment (e = 4 and the a-priori cell, both
    readings, fresh and wall), as target_plots does."""
    name = f"headline_{exp}"
    apriori = e.get("apriori")
    cells = [c for c in ["before_aug-e4-sb1000", apriori] if c and c in e["cells"]]
    if not cells:
        return
    cells = list(dict.fromkeys(cells))
    dat = f"{name}.dat"
    titles: List[str] = []
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
    parts: List[str] = []
    for i, t in enumerate(titles):
        dt = "1" if "held" in t else "2"
        parts.append(f"\"{dat}\" index {i} using ($1+{(i % 4) * 0.02 - 0.03:.2f}):2:3:4 "
                     f"with yerrorlines dt {dt} lc {i // 2 + 1} title \"{t}\"")
    parts.append("3 with lines dt 2 lc rgb \"black\" notitle")
    gp.append("plot " + ", \\\n  ".join(parts))
    names.append(name)
    gp.append("set key outside right top")


def gnuplot_script(writer: str) -> List[str]:
    """The opening lines of a plots.gp that draws every plot to PNG and SVG: the plots'
    lines follow, then gnuplot_draw closes the loop."""
    return [f"# Written by {writer}; run `gnuplot plots.gp` in this folder.",
            "set key outside right top", "set grid",
            "do for [fmt in \"png svg\"] {",
            "if (fmt eq \"png\") { set terminal pngcairo size 1000,600 noenhanced font \"sans,10\" } "
            "else { set terminal svg size 1000,600 noenhanced font \"sans,10\" dynamic }"]


def gnuplot_draw(pdir: str, gp: List[str], plots: int, draw: bool = True) -> str:
    """Closes gp, writes it to pdir/plots.gp and draws it with gnuplot (unless draw is
    false or gnuplot is missing); what was done, in words."""
    with open(os.path.join(pdir, "plots.gp"), "w") as f:
        f.write("\n".join(gp + ["}"]) + "\n")
    if not draw:
        return "plots not requested"
    if not shutil.which("gnuplot"):
        return "gnuplot not found: plots.gp written, not drawn"
    r = subprocess.run(["gnuplot", "plots.gp"], cwd=pdir, capture_output=True, text=True)
    with open(os.path.join(pdir, "gnuplot.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return f"gnuplot failed: see {os.path.join(pdir, 'gnuplot.log')}"
    return f"{2 * plots} plots in {pdir}"


def write_plots(out_dir: str, doc: Json, draw: bool = True) -> str:
    """plots/: each network experiment's plots against the target (data files and
    plots.gp), drawn with gnuplot unless draw is false; what was done, in words."""
    pdir = os.path.join(out_dir, "plots")
    os.makedirs(pdir, exist_ok=True)
    gp = gnuplot_script("experiments/protocol/targets.py")
    names: List[str] = []
    for exp in NETWORK_EXPS:
        if exp not in doc["experiments"]:
            continue
        e = doc["experiments"][exp]
        target_plots(gp, names, pdir, exp, e)
        headline_plot(gp, names, pdir, exp, e)
    return gnuplot_draw(pdir, gp, len(names), draw)
