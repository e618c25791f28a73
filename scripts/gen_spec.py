#!/usr/bin/python3
"""Writes what follows from the operators' declarations (include/dataecho/spec/schema.h).

    scripts/gen_spec.py [--bin build/bin/dataecho] [--check]

Reads every declaration from `dataecho spec` and writes:
  docs/spec.md                      the spec format's reference: every source, stage, map
                                    function and filter with its options, types, defaults
                                    and bounds;
  python/dataecho/_spec_options.py  the same options for the Python package (its methods'
                                    docstrings and the test that their keywords match).
With --check it writes nothing and exits 1, naming the files, when either is stale (the
test `spec_reference_current` runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import pprint
import subprocess
import sys
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = [("sources", "Sources", "the `source` object's `kind`"),
          ("stages", "Stages", "a stage's `op`"),
          ("map_functions", "Map functions", "a `map` stage's `fn`; the options go in its `args`"),
          ("filters", "Filters", "a `filter` stage's `fn`; the options go in its `args`")]


def default_of(o: Dict[str, Any]) -> str:
    if o.get("required"):
        return "required"
    if "default_text" in o:
        return o["default_text"]
    if "default" in o:
        return "`" + json.dumps(o["default"]) + "`"
    return "none"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def option_rows(options: List[Dict[str, Any]], prefix: str = "") -> List[str]:
    rows = []
    for o in options:
        name = prefix + o["name"]
        rows.append(f"| `{name}` | {cell(o['takes'])} | {cell(default_of(o))} | {cell(o['doc'])} |")
        rows += option_rows(o.get("fields", []), name + ".")
    return rows


def table(options: List[Dict[str, Any]]) -> List[str]:
    if not options:
        return ["No options."]
    return ["| option | takes | default | what it is |", "|---|---|---|---|"] + option_rows(options)


def markdown(schema: Dict[str, Any]) -> str:
    out = [
        "# The spec format",
        "",
        "<!-- Written by scripts/gen_spec.py from the operators' declarations (`dataecho spec`);",
        "     edit the declaration beside the operator's builder, not this page. -->",
        "",
        "Every source kind, stage op, map function and filter a pipeline spec can name, with",
        "each option's type, default and bounds, as the engine declares them",
        "(`include/dataecho/spec/schema.h`; `dataecho spec [NAME]` prints them as JSON). The",
        "same declarations read every spec, whichever way it was made (a JSON file, the C++",
        "builder, the Python package): an option outside its bounds, of the wrong type or",
        "not declared is refused before anything runs, with its JSON path and what it takes",
        "(`spec: $.stages[1].length: expected an integer in [1, 16777216], got number",
        "1099511627776`); a misspelt name gets the closest declared one and the list of them.",
        "How a spec is laid out: README.md, \"A pipeline in one JSON document\"; the C++ and",
        "Python builders: docs/api.md and docs/python.md.",
        "",
        "Contents: [the top level](#the-top-level), "
        + ", ".join(f"[{title.lower()}](#{title.lower().replace(' ', '-')})" for _, title, _ in GROUPS) + ".",
        "",
        "## The top level",
        "",
        schema["pipeline"]["doc"],
        "",
    ]
    out += table(schema["pipeline"]["options"])
    for key, title, what in GROUPS:
        out += ["", f"## {title}", "", f"The name is {what}.", ""]
        for s in schema[key]:
            out += [f"### `{s['name']}`", "", s["doc"], ""]
            out += table(s["options"])
            out.append("")
        while out and out[-1] == "":
            out.pop()
    return "\n".join(out) + "\n"


def python_table(schema: Dict[str, Any]) -> str:
    def rows(options: List[Dict[str, Any]]) -> List[Any]:
        return [(o["name"], o["takes"], default_of(o).strip("`"), o["doc"]) for o in options]

    tables = {key: {s["name"]: rows(s["options"]) for s in schema[key]} for key, _, _ in GROUPS}
    tables["pipeline"] = {"pipeline": rows(schema["pipeline"]["options"])}
    docs = {key: {s["name"]: s["doc"] for s in schema[key]} for key, _, _ in GROUPS}
    return (
        '"""The operators\' declared options (written by scripts/gen_spec.py from `dataecho spec`;\n'
        'do not edit): for each source, stage, map function and filter, its options as\n'
        '(name, what it takes, default, what it is), and what each does. Why this file is long:\n'
        'it is one table of every declared option, written whole from the declarations."""\n\n'
        "from typing import Dict, List, Tuple\n\n"
        "OPTIONS: Dict[str, Dict[str, List[Tuple[str, str, str, str]]]] = "
        + pprint.pformat(tables, width=100, sort_dicts=True)
        + "\n\nDOCS: Dict[str, Dict[str, str]] = "
        + pprint.pformat(docs, width=100, sort_dicts=True)
        + "\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("DATAECHO_BIN", os.path.join(ROOT, "build/bin/dataecho")))
    ap.add_argument("--check", action="store_true", help="exit 1 when a written file is stale")
    args = ap.parse_args()
    schema = json.loads(subprocess.run([args.bin, "spec"], check=True, capture_output=True, text=True).stdout)
    outputs = {os.path.join(ROOT, "docs/spec.md"): markdown(schema),
               os.path.join(ROOT, "python/dataecho/_spec_options.py"): python_table(schema)}
    stale = []
    for path, text in outputs.items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old == text:
            continue
        stale.append(os.path.relpath(path, ROOT))
        if not args.check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if args.check and stale:
        print("gen_spec: stale (the declarations changed): " + ", ".join(stale)
              + "; run scripts/gen_spec.py and commit them", file=sys.stderr)
        return 1
    print("gen_spec: " + ("wrote " + ", ".join(stale) if stale else "up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
