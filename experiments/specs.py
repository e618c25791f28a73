"""The experiments' pipeline specs, edited through ``dataecho.PipelineDef``: loaded from
their JSON, changed by the definition's own edits (``with_option``, ``inserting_after``,
``without``), checked as the engine checks them and written back.

  python3 -m experiments.specs edit IN OUT [--set OP.KEY=VALUE ...] [--echo-after FN FACTOR SHUFFLE]
      IN's spec with each --set applied to every stage of OP (VALUE as JSON: 64, true,
      "x"), then, with --echo-after and FACTOR > 1, an echo of FACTOR and a shuffle of
      SHUFFLE elements after the map stage of function FN (echoing before augmentation
      when FN is the decoding); written to OUT.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Mapping, Optional, Sequence, Union

from dataecho import PipelineDef, SpecError

Scalar = Union[bool, int, float, str]


def load_spec(spec: Union[str, Mapping[str, Any]]) -> PipelineDef:
    """A definition from a spec file's path or a spec dict (checked for its structure)."""
    return PipelineDef.from_spec(spec)


def write_spec(d: PipelineDef, path: str) -> None:
    """The definition's JSON spec written to ``path`` (indent 1, a final newline)."""
    with open(path, "w") as f:
        json.dump(d.to_spec(), f, indent=1)
        f.write("\n")


def with_each(d: PipelineDef, op: str, key: str, value: Scalar) -> PipelineDef:
    """Every stage of ``op`` with option ``key`` set to ``value``; SpecError without one."""
    at = d.find(op)
    if at is None:
        raise SpecError(f"the spec has no {op!r} stage to set {key!r} on")
    while at is not None:
        d = d.with_option(at, key, value)
        at = d.find(op, "", at + 1)
    return d


def with_echo_after(d: PipelineDef, fn: str, factor: float, shuffle: int) -> PipelineDef:
    """An echo of ``factor`` and a shuffle of ``shuffle`` elements right after the map
    stage of function ``fn``; the definition as it is for a factor of 1 or less."""
    if factor <= 1:
        return d
    at = d.find("map", fn)
    if at is None:
        raise SpecError(f"the spec has no map stage of function {fn!r} to echo after")
    return d.inserting_after(at, [{"op": "echo", "factor": factor}, {"op": "shuffle", "buffer": shuffle}])


def _setting(text: str) -> tuple[str, str, Scalar]:
    """(op, key, value) of a --set OP.KEY=VALUE."""
    target, sep, raw = text.partition("=")
    op, dot, key = target.partition(".")
    if not sep or not dot or not op or not key:
        raise SpecError(f"--set {text!r}: expected OP.KEY=VALUE (batch.size=64)")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a bare word: a string
    if not isinstance(value, (bool, int, float, str)):
        raise SpecError(f"--set {text!r}: the value must be a number, a boolean or a string")
    return op, key, value


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (the module's docstring)."""
    ap = argparse.ArgumentParser(prog="python3 -m experiments.specs")
    ap.add_argument("verb", choices=["edit"])
    ap.add_argument("spec_in")
    ap.add_argument("spec_out")
    ap.add_argument("--set", action="append", default=[], metavar="OP.KEY=VALUE")
    ap.add_argument("--echo-after", nargs=3, metavar=("FN", "FACTOR", "SHUFFLE"))
    a = ap.parse_args(argv)
    try:
        d = load_spec(a.spec_in)
        for s in a.set:
            d = with_each(d, *_setting(s))
        if a.echo_after:
            fn, factor, shuffle = a.echo_after
            d = with_echo_after(d, fn, float(factor) if "." in factor else int(factor), int(shuffle))
        write_spec(d, a.spec_out)
    except (SpecError, ValueError) as e:
        print(f"specs: {a.spec_in}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
