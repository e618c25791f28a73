"""The run files of the experiments, read in one place.

A training run (``dataecho train``, or one run of ``dataecho experiment``) leaves in its
folder ``summary.json`` (its totals), ``evals.jsonl`` (one JSON object per evaluation)
and, under the experiment runner, ``result.json`` (its config and summary); a network
part of the protocols leaves ``calibration.txt`` ("key: value" lines, written by
write_calibration below, which experiments/network_lib.sh's write_calibration calls). An
experiment's runs lie in ``cells/<cell>/seed-<N>/``.

Every reader checks what it reads and raises ``RunFileError`` naming the file, the record
(a line, a key) and what is wrong.

The shell scripts read these files through the command line:

  python3 -m experiments.runfiles value FILE KEY [DEFAULT]
      FILE's value at KEY (a JSON file; KEY a dotted path: ``overrides.max_steps``):
      a string as it is, a list one element a line, anything else as JSON. Without it
      (and no DEFAULT): an error naming the file and the keys there are.
  python3 -m experiments.runfiles calibration FILE KEY [DEFAULT]
      the value of KEY in a calibration.txt.
  python3 -m experiments.runfiles lr FILE CELL
      the learning rate an experiment report (``dataecho experiment --report-only --json``
      output; FILE ``-``: standard input) gives CELL: nothing when it has chosen none yet.
  python3 -m experiments.runfiles write-calibration FILE METHOD COMMIT RATE R FACTOR URL LR [LINE...]
      writes calibration.txt (the one writer beside read_calibration): the date, the
      commit, the machine (CPUs, model, load), the figures given, each extra "key: value"
      LINE, then the method.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple, TypedDict

Json = Dict[str, Any]


class RunFileError(ValueError):
    """A run file that is missing or malformed: the message names the file, the record
    and what is wrong."""


class Run(TypedDict):
    """One training run: its seed, its evaluations in order and its summary."""

    seed: int
    evals: List[Json]
    summary: Json


def _fail(path: str, what: str) -> NoReturn:
    """Raises RunFileError: "PATH: WHAT"."""
    raise RunFileError(f"{path}: {what}")


def check_fields(path: str, record: str, obj: Any, fields: Sequence[str]) -> None:
    """That ``obj``, the ``record`` of the file at ``path`` ("" for the whole file), is a
    JSON object with each of ``fields`` a number; RunFileError naming the first that is not."""
    at = f"{record}: " if record else ""
    if not isinstance(obj, dict):
        _fail(path, f"{at}expected a JSON object, got {type(obj).__name__}")
    missing = [f for f in fields if f not in obj]
    if missing:
        _fail(path, f"{at}no {', '.join(repr(f) for f in missing)} (it has {', '.join(sorted(obj))})")
    for f in fields:
        v = obj[f]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            _fail(path, f"{at}{f!r} is {json.dumps(v)}, expected a number")


def _read_text(path: str) -> str:
    """The file's text; RunFileError when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        _fail(path, "no such file")
    except (OSError, UnicodeDecodeError) as e:
        _fail(path, f"cannot be read: {e}")


def read_json(path: str, fields: Sequence[str] = ()) -> Json:
    """A JSON object file (summary.json, result.json, run.json, a report), with each of
    ``fields`` present as a number."""
    text = _read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        _fail(path, f"line {e.lineno} column {e.colno}: not JSON: {e.msg}")
    check_fields(path, "", doc, fields)
    out: Json = doc
    return out


def read_evals(path: str, fields: Sequence[str] = ("step",)) -> List[Json]:
    """evals.jsonl: one JSON object per non-empty line, each with ``fields`` as numbers,
    their steps increasing."""
    evals: List[Json] = []
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError as err:
            _fail(path, f"line {n}: not JSON: {err.msg} (column {err.colno})")
        check_fields(path, f"line {n}", e, fields)
        if "step" in fields and evals and e["step"] <= evals[-1]["step"]:
            _fail(path, f"line {n}: step {e['step']} after step {evals[-1]['step']}: the steps must increase")
        evals.append(e)
    return evals


def read_calibration(path: str) -> Dict[str, str]:
    """calibration.txt: {key: value} from its "key: value" lines (blank lines skipped),
    each key once."""
    out: Dict[str, str] = {}
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition(": ")
        if not sep or not key.strip():
            _fail(path, f"line {n}: expected 'key: value', got {line!r}")
        if key in out:
            _fail(path, f"line {n}: {key!r} again (line {list(out).index(key) + 1} has it)")
        out[key] = value
    return out


CALIBRATION_KEYS = ("rate", "R", "factor", "url", "baseline lr")


def machine_line() -> str:
    """This machine as calibration.txt records it: CPUs usable here, model, load averages."""
    model = ""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep and key.strip() == "model name":
                model = value.strip()
                break
    with open("/proc/loadavg", encoding="utf-8") as f:
        load = " ".join(f.read().split()[:3])
    return f"{len(os.sched_getaffinity(0))} CPUs, {model}, load {load}"


def write_calibration(path: str, method: str, commit: str, figures: Sequence[str],
                      extra: Sequence[str] = ()) -> None:
    """calibration.txt, as read_calibration reads it: the date, commit and machine, then
    CALIBRATION_KEYS' values (`figures`, in that order), the `extra` "key: value" lines
    and the method. A value with a line break, or an extra line that is not "key: value",
    is refused."""
    if len(figures) != len(CALIBRATION_KEYS):
        raise RunFileError(f"{path}: write-calibration takes {len(CALIBRATION_KEYS)} figures "
                           f"({', '.join(CALIBRATION_KEYS)}), got {len(figures)}")
    lines = [("date", datetime.datetime.now().astimezone().isoformat(timespec="seconds")),
             ("commit", commit), ("machine", machine_line()), *zip(CALIBRATION_KEYS, figures)]
    for n, line in enumerate(extra, start=1):
        key, sep, value = line.partition(": ")
        if not sep or not key.strip():
            _fail(path, f"extra line {n}: expected 'key: value', got {line!r}")
        lines.append((key, value))
    lines.append(("method", method))
    for key, value in lines:
        if "\n" in value:
            _fail(path, f"{key}: a value of one line expected, got {value!r}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{key}: {value}\n" for key, value in lines))


def read_calibration_runs(path: str) -> List[Tuple[int, float]]:
    """calibration_runs.txt, the calibration's measurements: [(bytes/s, R)] from its
    "RATE R" lines (blank lines skipped), in order."""
    out = []
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            out.append((int(parts[0]), float(parts[1])))
        except ValueError:
            _fail(path, f"line {n}: expected 'RATE R' (an integer bytes/s and a number), got {line!r}")
    return out


def read_run(run_dir: str, seed: int, summary_fields: Sequence[str] = (),
             eval_fields: Sequence[str] = ("step",)) -> Run:
    """The run in ``run_dir``: its summary.json (with ``summary_fields``) and evals.jsonl
    (each evaluation with ``eval_fields``)."""
    return {"seed": seed,
            "evals": read_evals(os.path.join(run_dir, "evals.jsonl"), eval_fields),
            "summary": read_json(os.path.join(run_dir, "summary.json"), summary_fields)}


def run_seeds(cell_dir: str) -> List[int]:
    """The seeds of the finished runs of a cell: its seed-N folders with a summary.json."""
    seeds = []
    for d in os.listdir(cell_dir):
        if not d.startswith("seed-") or not os.path.exists(os.path.join(cell_dir, d, "summary.json")):
            continue
        if not d[5:].isdigit():
            _fail(os.path.join(cell_dir, d), "a run folder is named seed-N, N a number")
        seeds.append(int(d[5:]))
    return sorted(seeds)


def load_cells(exp_dir: str, seeds: Sequence[int], only: Optional[str] = None,
               summary_fields: Sequence[str] = (), eval_fields: Sequence[str] = ("step",)) -> Dict[str, List[Run]]:
    """{cell: its runs on ``seeds``, in that order} over the cells under exp_dir/cells
    (``only``: that cell alone) that have finished every one of them."""
    cells: Dict[str, List[Run]] = {}
    cdir = os.path.join(exp_dir, "cells")
    if not os.path.isdir(cdir):
        _fail(cdir, "no such folder: the experiment has no runs here")
    for cell in sorted(os.listdir(cdir)) if only is None else [only]:
        runs = []
        for s in seeds:
            d = os.path.join(cdir, cell, f"seed-{s}")
            if not os.path.exists(os.path.join(d, "summary.json")):
                break
            runs.append(read_run(d, s, summary_fields, eval_fields))
        if len(runs) == len(seeds):
            cells[cell] = runs
    return cells


def load_all_seeds(exp_dir: str, summary_fields: Sequence[str] = (),
                   eval_fields: Sequence[str] = ("step",)) -> Dict[str, List[Run]]:
    """{cell: its runs}: each cell on every seed it has finished, in seed order."""
    cdir = os.path.join(exp_dir, "cells")
    if not os.path.isdir(cdir):
        _fail(cdir, "no such folder: the experiment has no runs here")
    cells: Dict[str, List[Run]] = {}
    for cell in sorted(os.listdir(cdir)):
        seeds = run_seeds(os.path.join(cdir, cell))
        if seeds:
            cells.update(load_cells(exp_dir, seeds, cell, summary_fields, eval_fields))
    return cells


def value_at(doc: Any, key: str, path: str) -> Any:
    """The value at a dotted ``key`` of a JSON document read from ``path``."""
    here = doc
    for i, part in enumerate(key.split(".")):
        if not isinstance(here, dict) or part not in here:
            at = ".".join(key.split(".")[:i]) or "the top level"
            has = f"it has {', '.join(sorted(here))}" if isinstance(here, dict) else "not an object"
            _fail(path, f"no {key!r}: {at} has no {part!r} ({has})")
        here = here[part]
    return here


def tuned_lr(report: Json, cell: str, path: str) -> Optional[float]:
    """The learning rate an experiment report gives ``cell``; None before it has one."""
    cells = report.get("cells")
    if not isinstance(cells, list):
        _fail(path, "no 'cells' list: not an experiment report")
    for c in cells:
        if isinstance(c, dict) and c.get("cell") == cell:
            lr = c.get("lr")
            if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float))):
                _fail(path, f"cell {cell!r}: 'lr' is {json.dumps(lr)}, expected a number")
            out: Optional[float] = lr
            return out
    return None


def _text(v: Any) -> str:
    """A value as the command line prints it (the module's docstring)."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(_text(x) for x in v)
    return json.dumps(v)


def _report(path: str) -> Json:
    """An experiment report from a file, or from standard input for "-"."""
    if path != "-":
        return read_json(path)
    try:
        doc = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        _fail("standard input", f"line {e.lineno} column {e.colno}: not JSON: {e.msg}")
    if not isinstance(doc, dict):
        _fail("standard input", "expected a JSON object")
    out: Json = doc
    return out


def main(argv: Sequence[str]) -> int:
    """The command line (the module's docstring): prints the value asked for."""
    args = list(argv)
    if args[:1] == ["write-calibration"] and len(args) >= 9:
        try:
            write_calibration(args[1], args[2], args[3], args[4:9], args[9:])
            return 0
        except RunFileError as e:
            print(f"runfiles: {e}", file=sys.stderr)
            return 1
    if len(args) not in (3, 4) or args[0] not in ("value", "calibration", "lr") or (args[0] == "lr" and len(args) != 3):
        print(__doc__, file=sys.stderr)
        return 2
    verb, path, key = args[:3]
    default = args[3] if len(args) == 4 else None
    try:
        if verb == "lr":
            lr = tuned_lr(_report(path), key, "standard input" if path == "-" else path)
            if lr is not None:
                print(json.dumps(lr))
            return 0
        if verb == "calibration":
            cal = read_calibration(path)
            if key not in cal and default is None:
                _fail(path, f"no {key!r} (it has {', '.join(cal)})")
            print(cal.get(key, default))
            return 0
        doc = read_json(path)
        try:
            print(_text(value_at(doc, key, path)))
        except RunFileError:
            if default is None:
                raise
            print(default)
        return 0
    except RunFileError as e:
        print(f"runfiles: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
