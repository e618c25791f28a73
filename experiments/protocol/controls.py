"""The protocol's controls and the budgets chosen from them (docs/protocol.md), read by
the held reading at 90%:

  A1: echoing after augmentation (identical copies) at e = 2 and 4 against the baseline;
  C:  the baseline and e = 4 at the step budgets 1,950 / 2,925 / 3,900 / 5,850, each
      cell's best budget, and the reduction between the two best;
  B:  the baseline and e = 4 re-tuned over rates and weight decays;
  A2: batch augmentation at batch 256;
  each cell at its own best budget: the baseline, e = 4 and e = 5 each with the budget
      chosen by C's rule on local runs, then run over the network at R about 5.

Also the command line run.sh budgets renders its cells with:
  python3 -m experiments.protocol.controls budget-cells [--root results/protocol]
prints the experiment's cells (JSON objects, comma-separated), a tab, and its tuning map.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from .. import stats
from ..runfiles import Json, Run
from .readings import SEEDS, figures, final_and_swing, load_runs, observe, points_text, ratio_text

CONTROL_SEEDS_A1 = list(range(1, 11))
BUDGETS_C = [1950, 2925, 3900, 5850]
# The cells each run at their own best budget: (name, the network runs' cell id, factor).
BUDGET_CELLS: List[Tuple[str, str, Optional[int]]] = [
    ("baseline", "baseline", None), ("e4", "before_aug-e4-sb1000", 4), ("e5", "before_aug-e5-sb1000", 5)]
BUDGET_SEEDS = list(range(1, 11))
BudgetRuns = Tuple[Dict[str, List[Run]], Dict[str, List[Run]]]


def a1_section(root: str) -> Json:
    """A1: after augmentation against the baseline, seeds 1-10 where the baseline has
    them, else 1-5 (said in the output)."""
    cdir, net = os.path.join(root, "controls"), os.path.join(root, "network-r5")
    a1: Json = {}
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
    return a1


def controls_section(root: str) -> Optional[Json]:
    """A1 and C from results/protocol/controls (and, for the 3,900-step budget and the
    baseline, network-r5: the same computation). None when there are no controls."""
    if not os.path.isdir(os.path.join(root, "controls", "cells")):
        return None
    out: Json = {"registered": "docs/protocol.md: the controls", "target": 90.0, "reading": "held"}
    out["A1"] = a1_section(root)
    # C: each cell's smallest median fresh examples to hold 90% over the budgets at which
    # at least 3 of 5 seeds hold it; the reduction between the two cells' best budgets.
    c_out: Json = {}
    best_runs: Dict[str, List[Run]] = {}
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


def load_budget_runs(root: str) -> BudgetRuns:
    """(controls, network-r5): the runs budget_choice reads, seeds 1-5, loaded once."""
    return load_runs(os.path.join(root, "controls")), load_runs(os.path.join(root, "network-r5"))


def budget_choice(budget_runs: BudgetRuns, stem: str) -> Tuple[Json, Optional[List[Run]]]:
    """C's rule for one cell (`stem`, a cell id of the network runs): on seeds 1-5, at
    each budget of BUDGETS_C (3,900 from network-r5, the others from
    controls/<stem>-s<S>: fresh counts do not depend on R), how many seeds hold 90% and
    their median fresh examples to it; the best budget is the one with the smallest
    median among those where at least 3 of 5 hold (a tie: the shorter).
    budget_runs: load_budget_runs(root). Returns (the choice as JSON, the best budget's
    runs or None)."""
    ctl, netr = budget_runs
    per: Dict[int, Json] = {}
    for S in BUDGETS_C:
        runs = netr.get(stem) if S == 3900 else ctl.get(f"{stem}-s{S}")
        if runs is None:
            continue
        obs = [observe(r, 9000, "held") for r in runs]
        per[S] = {"runs": runs, "held": sum(1 for o in obs if not o["censored"]),
                  "fresh": stats.estimate_median([(o["fresh"], o["censored"]) for o in obs]),
                  "final": final_and_swing(runs, S // 2)}
    eligible = [S for S, v in per.items() if v["held"] >= 3]  # BUDGETS_C order: ties go short
    best = min(eligible, key=lambda S: per[S]["fresh"]["median"]) if eligible else None
    choice = {"budgets": {str(S): {"held": v["held"], "fresh": v["fresh"], "final": v["final"]}
                          for S, v in per.items()},
              "complete": len(per) == len(BUDGETS_C), "best_budget": best}
    return choice, (per[best]["runs"] if best else None)


def budgets_choice(root: str) -> Json:
    """{cell: its choice (budget_choice's JSON with the cell's stem)}; a cell's budget is
    chosen once every budget of it has run."""
    out: Json = {}
    budget_runs = load_budget_runs(root)
    for cell, stem, _ in BUDGET_CELLS:
        choice, _runs = budget_choice(budget_runs, stem)
        out[cell] = {"stem": stem, **choice}
    return out


def budget_cells(root: str) -> Tuple[List[Json], Dict[str, str]]:
    """The cells of the network runs at each cell's best budget (a cell whose budget is
    3,900 has its runs in network-r5 already: none) and the tuning map that gives each
    the rate of its stem. SystemExit, with what to run, before every cell has its budget."""
    choice = budgets_choice(root)
    if not all(v["complete"] and v["best_budget"] for v in choice.values()):
        chosen = {c: v["best_budget"] if v["complete"] else None for c, v in choice.items()}
        raise SystemExit(f"protocol budgets: not every cell has a chosen budget yet ({json.dumps(chosen)}): "
                         "run `run.sh controls`, then `run.sh collect`")
    cells: List[Json] = []
    tuned: Dict[str, str] = {}
    for cell, stem, factor in BUDGET_CELLS:
        budget = choice[cell]["best_budget"]
        if budget == 3900:
            continue  # network-r5's runs
        c: Json = {"id": f"{stem}-s{budget}",
                   "variant": "baseline" if factor is None else "example_before_augmentation",
                   "seeds": BUDGET_SEEDS, "overrides": {"max_steps": budget}}
        if factor is not None:
            c.update(factor=factor, shuffle_after_echo=1000)
        cells.append(c)
        tuned[f"{stem}-s{budget}"] = stem
    return cells, tuned


def budgets_section(root: str) -> Json:
    """Each cell's budget chosen on local runs, then the network runs at R about 5
    (network-r5's calibration) at those budgets, seeds 1-10: fresh reduction and
    wall-clock speedup at 90% under both readings, beside the 3,900-step headline. A cell
    whose budget is 3,900 is read from network-r5 (those are its runs); the others from
    network-budgets-r5/cells/<stem>-s<S>."""
    choice = budgets_choice(root)
    out: Json = {"registered": "docs/protocol.md: each cell at its own best budget", "target": 90.0, "choice": choice}
    if not all(v["complete"] and v["best_budget"] for v in choice.values()):
        out["status"] = "choosing: not every budget of every cell has its 5 local seeds"
        return out
    final: Dict[str, List[Run]] = {}
    missing = []
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
        out["status"] = "final runs to do: " + ", ".join(missing) + " (seeds 1-10)"
        return out
    out["status"] = "complete"
    out["baseline_r_in_training"] = stats.median([r["summary"]["r_estimate"] for r in final["baseline"]])
    out["figures"] = {cell: {reading: figures(final["baseline"], final[cell], 9000, reading)
                             for reading in ("first_touch", "held")}
                      for cell in ("e4", "e5")}
    return out


def budgets_lines(b: Optional[Json]) -> List[str]:
    """table.txt's lines for each cell at its own best budget."""
    if not b:
        return []
    lines = ["", "== each cell's schedule ending at its own best budget (90%) =="]
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


def group_winners(runs: Dict[str, List[Run]]) -> Dict[str, str]:
    """{stem: the one member of its tuning group with final runs} for B's two groups."""
    winners = {}
    for stem in ("baseline", "before_aug-e4-sb1000"):
        won = [c for c in runs if c == stem or c.startswith(stem + "-wd")]
        if len(won) == 1:
            winners[stem] = won[0]
    return winners


def retune_section(root: str) -> Optional[Json]:
    """B and A2 from results/protocol/retune: the runs of each tuning group's winner (the
    only member with final runs) and of batch augmentation, seeds 1-10 (1-5 while the
    rest run). None before any of them has its seeds."""
    rdir = os.path.join(root, "retune")
    if not os.path.isdir(os.path.join(rdir, "cells")):
        return None
    out: Json = {"registered": "docs/protocol.md: the controls", "target": 90.0, "reading": "held"}
    for seeds in (CONTROL_SEEDS_A1, SEEDS):
        runs = load_runs(rdir, seeds)
        base_net = load_runs(os.path.join(root, "network-r5"), seeds).get("baseline")
        winners = group_winners(runs)
        if "B" not in out and len(winners) == 2:
            f = figures(runs[winners["baseline"]], runs[winners["before_aug-e4-sb1000"]],
                        9000, "held", with_wall=False)
            red = f["fresh_reduction"]
            out["B"] = {"seeds": seeds, "baseline_cell": winners["baseline"],
                        "e4_cell": winners["before_aug-e4-sb1000"], "figures": f,
                        "final": {c: final_and_swing(runs[c], 1950) for c in winners.values()},
                        "verdict": "refutes B" if red and red["ci95"][0] > 4 else "supports B"}
        if "A2" not in out and "batchaug-e2-bs256" in runs and base_net:
            f = figures(base_net, runs["batchaug-e2-bs256"], 9000, "held", with_wall=False)
            red = f["fresh_reduction"]
            out["A2"] = {"seeds": seeds, "figures": f,
                         "final": final_and_swing(runs["batchaug-e2-bs256"], 1950),
                         "baseline_final": final_and_swing(base_net, 1950),
                         "supports_A": bool(red and red["ci95"][0] > 1)}
    return out


def final_text(v: Json) -> str:
    """A cell's final accuracy and late swing, as table.txt prints them."""
    return (f"final {100 * v['final_accuracy_median']:.2f}%, late swing {points_text(v['sigma_late_points'])} / "
            f"thinned {points_text(v['sigma_late_thinned_points'])}")


def a1_and_c_lines(controls: Json) -> List[str]:
    """table.txt's lines for A1 and C."""
    lines = []
    for cell, v in controls["A1"].items():
        f = v["figures"]
        lines.append(f"  A1 {cell} (seeds {v['seeds'][0]}-{v['seeds'][-1]}): fresh/ "
                     f"{ratio_text(f['fresh_reduction'])}, held {f['reached']}/{f['runs']}: "
                     + ("interval wholly above e: refutes A as the whole explanation"
                        if v["refutes_A"] else "interval not wholly above e"))
        lines.append(f"     {final_text(v['final'])}; baseline {final_text(v['baseline_final'])}")
    for cell in ("baseline", "e4"):
        v = controls["C"][cell]
        lines.append(f"  C {cell}: " + ", ".join(
            f"S={S}: {b['held']}/5 hold, median {'~' if b['fresh']['median_censored'] else ''}"
            f"{b['fresh']['median']:.0f}" for S, b in v["budgets"].items())
            + f"; best budget {v['best_budget']}"
            + ("" if v["complete"] else " (not every budget has run)"))
        for S, b in v["budgets"].items():
            lines.append(f"     S={S}: {final_text(b['final'])} (swing from step {int(S) // 2})")
    if "reduction" in controls["C"]:
        lines.append(f"  C: baseline / e = 4 at their best budgets {ratio_text(controls['C']['reduction'])}"
                     f": {controls['C']['verdict']}")
    return lines


def b_and_a2_lines(retune: Json) -> List[str]:
    """table.txt's lines for B and A2."""
    lines = []
    if "B" in retune:
        b = retune["B"]
        lines.append(f"  B (seeds {b['seeds'][0]}-{b['seeds'][-1]}): {b['baseline_cell']} / {b['e4_cell']} "
                     f"{ratio_text(b['figures']['fresh_reduction'])}: {b['verdict']}")
        for c, v in b["final"].items():
            lines.append(f"     {c}: {final_text(v)}")
    if "A2" in retune:
        a2 = retune["A2"]
        lines.append(f"  A2 batch augmentation (seeds {a2['seeds'][0]}-{a2['seeds'][-1]}): baseline / "
                     f"batchaug-e2-bs256 {ratio_text(a2['figures']['fresh_reduction'])}: "
                     + ("supports A" if a2["supports_A"] else "interval reaches 1 or lies below"))
        lines.append(f"     {final_text(a2['final'])}; baseline {final_text(a2['baseline_final'])}")
    return lines


def controls_lines(controls: Optional[Json], retune: Optional[Json]) -> List[str]:
    """table.txt's lines for the controls (A1, C, B, A2)."""
    lines = []
    if controls or retune:
        lines.append("")
        lines.append("== the controls (docs/protocol.md), 90% held; a control added after the results "
                     "it checks ==")
    if controls:
        lines += a1_and_c_lines(controls)
    if retune:
        lines += b_and_a2_lines(retune)
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: budget-cells (the module's docstring)."""
    ap = argparse.ArgumentParser(prog="python3 -m experiments.protocol.controls")
    ap.add_argument("what", choices=["budget-cells"])
    ap.add_argument("--root", default="results/protocol")
    a = ap.parse_args(argv)
    cells, tuned = budget_cells(a.root)
    print(", ".join(json.dumps(c) for c in cells) + "\t" + ", ".join(f'"{k}": "{v}"' for k, v in tuned.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
