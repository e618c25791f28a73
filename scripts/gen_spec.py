#!/usr/bin/python3
"""Writes what follows from the operators' declarations (include/dataecho/spec/schema.h).

    scripts/gen_spec.py [--bin build/bin/dataecho] [--check]

Reads every declaration from `dataecho spec` and writes:
  docs/spec.md                      the spec format's reference: every source, stage, map
                                    function and filter with its options, types, defaults
                                    and bounds;
  python/dataecho/_spec_options.py  the same options for the Python package (the
                                    docstrings of its hand-written methods and the test that
                                    every method's keywords match);
  python/dataecho/_declared.py      the Python package's stage methods and source functions:
                                    each one's signature (types, defaults) and docstring
                                    from its op's declaration, but for the few with a
                                    Python form of their own (HAND_WRITTEN), and the
                                    methods that make a source of the pipeline so far
                                    (SOURCE_METHODS: distribute, the service source's);
  include/dataecho/spec/stage_options.h, src/spec/stage_options.cc
                                    the C++ fluent builder's option structs (MapStageOptions,
                                    ...) and the function that gives each struct's fields to
                                    PipelineDef::declared_stage (CPP_STRUCTS).
With --check it writes nothing and exits 1, naming the files, when either is stale (the
test `spec_reference_current` runs it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pprint
import subprocess
import sys
import textwrap
from typing import Any, Dict, List, Optional, Tuple

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


# The Python API's shape where the declaration does not decide it. Required options are
# positional; these optional ones are positional too, in declared order. Ops whose Python
# form is written by hand in _definition.py (a callable, options of their own) are not
# generated (elastic: put first, not appended). A default for Python where the spec
# requires the option: echo(2).
PYTHON_POSITIONAL = {"bucket": {"boundaries", "batch_sizes"}, "idx": {"images", "labels"},
                     "echo": {"factor"}, "files": {"root"}, "cache": {"path"},
                     "interleave": {"cycle"}, "prefetch": {"buffer"}, "repeat": {"count"}}
PYTHON_DEFAULTS = {("echo", "factor"): 2}
HAND_WRITTEN = {"stages": {"map", "filter", "pack", "elastic"}, "sources": {"sample"}}
# Methods that make a source of the pipeline so far: method -> (source, the source's option
# that takes the pipeline, what the method does). The method takes the source's other
# options and hands them to PipelineDef._of_source.
SOURCE_METHODS = {"distribute": ("service", "pipeline",
                                 "This pipeline run on the data service's workers: a new definition whose source is a "
                                 "`service` source with this pipeline (its source and stages so far, its seed and "
                                 "settings) as the upstream `pipeline`; the stages added after it (shuffle, echo, "
                                 "batch, prefetch) run in this process, on the trainer's side. Each pass of the built "
                                 "pipeline (iterated again, set_epoch, a DataLoader's pass) reads the job's next "
                                 "epoch, as a repeat after it does (docs/python.md, \"The data service\"). "
                                 "Refused (SpecError, a ValueError) for a pipeline without a source, one that is "
                                 "distributed already, and one with a Python callable (the workers build the "
                                 "upstream from its JSON spec).")}
PATH_OPTIONS = {"root", "list", "base", "path", "cache_dir", "images", "labels", "token_file",
                "ca_file", "ca_path"}
PY_TYPES = {"int": "int", "number": "float", "bool": "bool", "string": "str",
            "strings": "Union[str, Sequence[str]]", "ints": "Sequence[int]",
            "int_or_auto": "Union[int, str]", "factor": "Union[float, str]",
            "object": "Mapping[str, Any]", "json": "Any"}


def python_default(group: str, op: str, o: Dict[str, Any]) -> Tuple[bool, Any]:
    """(has a default, the default) of option `o` in the Python signature: none for a required
    option; for a stage's option that the builders write always or leave out at its
    default, the declared default (the spec comes out as before); else None ("not given")."""
    if (op, o["name"]) in PYTHON_DEFAULTS:
        return True, PYTHON_DEFAULTS[(op, o["name"])]
    if o["required"] or (group == "stages" and o["written"] == "always" and "default" not in o):
        return False, None
    if group == "stages" and o["written"] in ("always", "unless_default") and "default" in o:
        d = o["default"]
        if isinstance(d, (bool, int, float, str)) or (isinstance(d, list) and not d):
            return True, tuple(d) if isinstance(d, list) else d
    return True, None


def python_parameter(group: str, op: str, o: Dict[str, Any]) -> str:
    t = PY_TYPES[o["type"]]
    if o["type"] == "string" and o["name"] in PATH_OPTIONS:
        t = 'Union[str, "os.PathLike[str]"]'
    has_default, d = python_default(group, op, o)
    if not has_default:
        return f"{o['name']}: {t}"
    if d is None and t != "Any":
        t = f"Optional[{t}]"
    return f"{o['name']}: {t} = {json.dumps(d) if isinstance(d, str) else repr(d)}"


def python_signature(group: str, op: str, options: List[Dict[str, Any]], first: str) -> List[str]:
    positional = [o for o in options if o["required"] or o["name"] in PYTHON_POSITIONAL.get(op, set())]
    keyword = [o for o in options if o not in positional]
    params = [first] if first else []
    params += [python_parameter(group, op, o) for o in positional]
    if keyword:
        params.append("*")
        params += [python_parameter(group, op, o) for o in keyword]
    return params


def _load_option_text() -> Any:
    """python/dataecho/_option_text.py, the one format of an option's docstring line, loaded
    as a file (importing the package would need the built extension)."""
    path = os.path.join(ROOT, "python/dataecho/_option_text.py")
    spec = importlib.util.spec_from_file_location("dataecho_option_text", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # No bytecode cache: a __pycache__ in the package's source folder would be packaged.
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module


OPTION_TEXT = _load_option_text()


def option_line(o: Dict[str, Any]) -> str:
    return str(OPTION_TEXT.option_line(o["name"], o["takes"], default_of(o).strip("`"), o["doc"]))


def python_docstring(s: Dict[str, Any], indent: str) -> str:
    def wrapped(text: str) -> List[str]:
        return textwrap.wrap(text.replace("`", "``"), 92 - len(indent), break_long_words=False,
                             break_on_hyphens=False) or [""]

    lines = wrapped(s["doc"]) + ["", f'Options (docs/spec.md, "{s["name"]}"):', ""]
    for o in s["options"]:
        lines += [line.replace("````", "``") for line in textwrap.wrap(
            option_line(o), 92 - len(indent), break_long_words=False, break_on_hyphens=False)]
    if not s["options"]:
        lines.append("No options.")
    body = "\n".join((indent + line) if line else "" for line in lines)
    return f'{indent}"""{body.lstrip()}\n{indent}"""'


def joined(start: str, params: List[str], end: str, width: int = 110) -> str:
    """`start` + params + `end`, broken between parameters into lines of at most `width`."""
    lines, line = [], start
    for i, p in enumerate(params):
        last = i + 1 == len(params)
        piece = p + (end if last else ", ")
        if len(line) + len(piece.rstrip()) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(start)
        line += piece
    return "\n".join(lines + [line if params else line + end])


def python_def(group: str, s: Dict[str, Any]) -> List[str]:
    method = group == "stages"
    indent = "        " if method else "    "
    name = s["name"]
    signature = python_signature(group, name, s["options"], "self" if method else "")
    start = f"{indent[:-4]}def {name}("
    head = joined(start, signature, ') -> PipelineDef:')
    call = (f'{indent}return self._declared("{name}", locals())' if method
            else f'{indent}return _source("{name}", locals())')
    noqa = "  # noqa: A001 (the spec's name)" if name in ("range", "list") else ""
    return [head + noqa, python_docstring(s, indent), call, ""]


def python_source_method(schema: Dict[str, Any], name: str) -> List[str]:
    """SOURCE_METHODS[name]: a stage method taking a source's options but the pipeline's own."""
    kind, taken, doc = SOURCE_METHODS[name]
    s = next(s for s in schema["sources"] if s["name"] == kind)
    options = [o for o in s["options"] if o["name"] != taken]
    head = joined(f"    def {name}(", python_signature("sources", kind, options, "self"), ') -> PipelineDef:')
    docstring = python_docstring({"name": kind, "doc": doc, "options": options}, "        ")
    return [head, docstring, f'        return self._of_source("{kind}", "{taken}", locals())', ""]


def python_declared(schema: Dict[str, Any]) -> str:
    out = ['"""The stage methods and source functions of the Python package, written by',
           "scripts/gen_spec.py from the operators' declarations (`dataecho spec`; do not edit):",
           "each one's keywords, types, defaults and docstring come from its op's declaration",
           "(include/dataecho/spec/schema.h, docs/spec.md). ``PipelineDef`` (_definition.py)",
           "inherits the methods; the ops with a Python form of their own are written there.",
           '"""', "", "from __future__ import annotations", "", "import os",
           "from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union", "",
           "if TYPE_CHECKING:", "    from ._definition import PipelineDef", "", "",
           "class DeclaredStages:",
           '    """The stage methods that follow from the declarations alone."""', "",
           "    __slots__ = ()", "",
           '    def _declared(self, op: str, options: Mapping[str, Any]) -> PipelineDef:',
           "        raise NotImplementedError  # PipelineDef's", "",
           '    def _of_source(self, kind: str, taken: str, options: Mapping[str, Any]) -> PipelineDef:',
           "        raise NotImplementedError  # PipelineDef's", ""]
    for s in schema["stages"]:
        if s["name"] not in HAND_WRITTEN["stages"]:
            out += python_def("stages", s)
    for name in sorted(SOURCE_METHODS):
        out += python_source_method(schema, name)
    out += ["", 'def _source(kind: str, options: Mapping[str, Any]) -> PipelineDef:',
            "    from ._definition import declared_source  # which imports this module", "",
            "    return declared_source(kind, options)", ""]
    for s in schema["sources"]:
        if s["name"] not in HAND_WRITTEN["sources"]:
            out += ["", *python_def("sources", s)]
    while out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


# The C++ fluent builder's option structs: op -> struct. A field per declared option, in
# declared order, named as the option, but for the options a method takes as arguments
# (CPP_ARGUMENTS) and those whose C++ form is its own (CPP_FIELDS: the lines of the struct
# and the expression that gives the option's JSON value from `o`); CPP_BEFORE puts fields
# of C++'s own before an option's.
CPP_STRUCTS = {"map": "MapStageOptions", "shuffle": "ShuffleStageOptions", "batch": "BatchStageOptions",
               "padded_batch": "PaddedBatchStageOptions", "pack": "PackStageOptions",
               "bucket": "BucketStageOptions", "echo": "EchoStageOptions",
               "interleave": "InterleaveStageOptions", "cache": "CacheStageOptions"}
CPP_ARGUMENTS = {"map": {"fn", "args"}}
CPP_FIELDS = {
    ("echo", "factor"): (["double factor = 2;  // >= 1; fractional: floor(e) copies, one more with p = frac",
                          "bool adaptive = false;  // adaptive echoing: repeats only while the input is late",
                          "bool autotune = false;  // adaptive, its cap set by the tuner (\"factor\": \"auto\")"],
                         'o.autotune ? json("auto") : o.adaptive ? json("adaptive") : json(o.factor)'),
    ("cache", "on_full"): (["bool prefix = false;  // memory: keep the prefix that fits (\"on_full\": \"prefix\")"],
                           'o.prefix ? "prefix" : "fail"'),
}
CPP_BEFORE = {("pack", "field"): [
    "// Also each block's sequences' epochs and echo indices, as fields \"epochs\" and \"echoes\"",
    "// (or the names epochs_field and echoes_field give): the trainer counts fresh sequences.",
    "bool reads = false;"]}
CPP_TYPES = {"int": "int64_t", "number": "double", "bool": "bool", "string": "std::string",
             "strings": "std::vector<std::string>", "ints": "std::vector<int64_t>", "int_or_auto": "int64_t",
             "object": "nlohmann::json", "json": "nlohmann::json"}
LICENSE_NOTE = "Written by scripts/gen_spec.py from the operators' declarations: do not edit."


def cpp_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "{}"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def cpp_field(o: Dict[str, Any]) -> Tuple[str, str]:
    """The struct's line for option `o` (without its comment) and the expression that gives
    its JSON value (null: not given) from `o`: a plain field where the builders write the
    option always or leave it out at its default, else a std::optional."""
    t = "uint64_t" if o["name"] == "seed" else CPP_TYPES[o["type"]]
    n = o["name"]
    value = f"tunable(o.{n})" if o["type"] == "int_or_auto" else f"o.{n}"
    if t == "nlohmann::json":
        return f"nlohmann::json {n} = nullptr;", value
    if o["required"]:
        return f"{t} {n} = {'{}' if t.startswith('std::') else 0};", value
    if o["written"] in ("always", "unless_default") and "default" in o:
        return f"{t} {n} = {cpp_literal(o['default'])};", value
    if o["written"] == "always":
        return f"{t} {n} = {{}};", value
    given = f"o.{n} ? tunable(*o.{n}) : nullptr" if o["type"] == "int_or_auto" else f"given(o.{n})"
    return f"std::optional<{t}> {n} = std::nullopt;", given


def commented(line: str, comment: str, indent: str = "  ") -> List[str]:
    """`line` below `comment`, wrapped to 100 columns (as clang-format leaves it)."""
    return [indent + "// " + c for c in textwrap.wrap(comment, 97 - len(indent))] + [indent + line]


def cpp_struct(s: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """The struct of op `s` and the statements of the function that gives its options."""
    op, name = s["name"], CPP_STRUCTS[s["name"]]
    fields, entries = [], []
    for o in s["options"]:
        if o["name"] in CPP_ARGUMENTS.get(op, set()):
            continue
        fields += ["  " + line for line in CPP_BEFORE.get((op, o["name"]), [])]
        if (op, o["name"]) in CPP_FIELDS:
            lines, value = CPP_FIELDS[(op, o["name"])]
            for line in lines:
                code, _, comment = line.partition("  // ")
                fields += commented(code, comment)
        else:
            code, value = cpp_field(o)
            comment = o["doc"] + ("; " + o["takes"] if o["type"] == "json" else "")
            comment = "required; " + comment if o["required"] else comment + "; default " + default_of(o)
            fields += commented(code, comment.replace("`", ""))
        entries.append(f'  j["{o["name"]}"] = {value};')
    first = s["doc"].replace("`", "").split(". ")[0].rstrip(".") + "."
    doc = ["// " + line for line in textwrap.wrap(f"{s['name']}: {first}", 97)]
    return doc + [f"struct {name} {{"] + fields + ["};"], entries


def cpp_header(schema: Dict[str, Any]) -> str:
    out = ["// The C++ fluent builder's options (PipelineDef::map, ::shuffle, ...): a struct per op, a",
           "// field per declared option with its default, unset fields keep the op's defaults.",
           "// " + LICENSE_NOTE, "// Thread-safety: plain values.", "#pragma once", "",
           "#include <cstdint>", "#include <optional>", "#include <string>", "#include <vector>", "",
           "#include <nlohmann/json.hpp>", "", "namespace dataecho {", ""]
    stages = {s["name"]: s for s in schema["stages"]}
    for op in CPP_STRUCTS:
        out += cpp_struct(stages[op])[0] + [""]
    out += ["// Each struct's options as PipelineDef::declared_stage takes them (null: not given).",
            *[f"nlohmann::json declared_options(const {name}& o);" for name in CPP_STRUCTS.values()],
            "// A parallelism or buffer as a spec writes it: the count, or \"auto\" for kAutotune.",
            "nlohmann::json tunable(int64_t n);", "", "}  // namespace dataecho", ""]
    return "\n".join(out)


def cpp_source(schema: Dict[str, Any]) -> str:
    out = ["// declared_options and tunable (stage_options.h).", "// " + LICENSE_NOTE,
           '#include "dataecho/spec/stage_options.h"', "",
           '#include "dataecho/spec/pipeline_def.h"', "", "namespace dataecho {", "namespace {", "",
           "using nlohmann::json;", "",
           "template <class T>", "json given(const std::optional<T>& v) {",
           "  return v ? json(*v) : json(nullptr);", "}", "",
           "}  // namespace", "",
           "json tunable(int64_t n) { return n == kAutotune ? json(\"auto\") : json(n); }", ""]
    stages = {s["name"]: s for s in schema["stages"]}
    for op, name in CPP_STRUCTS.items():
        out += [f"json declared_options(const {name}& o) {{", "  json j;", *cpp_struct(stages[op])[1],
                "  return j;", "}", ""]
    out += ["}  // namespace dataecho", ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("DATAECHO_BIN", os.path.join(ROOT, "build/bin/dataecho")))
    ap.add_argument("--check", action="store_true", help="exit 1 when a written file is stale")
    args = ap.parse_args()
    schema = json.loads(subprocess.run([args.bin, "spec"], check=True, capture_output=True, text=True).stdout)
    outputs = {os.path.join(ROOT, "docs/spec.md"): markdown(schema),
               os.path.join(ROOT, "python/dataecho/_spec_options.py"): python_table(schema),
               os.path.join(ROOT, "python/dataecho/_declared.py"): python_declared(schema),
               os.path.join(ROOT, "include/dataecho/spec/stage_options.h"): cpp_header(schema),
               os.path.join(ROOT, "src/spec/stage_options.cc"): cpp_source(schema)}
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
