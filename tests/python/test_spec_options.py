"""The Python package's methods and source functions take exactly the options the engine
declares (include/dataecho/spec/schema.h, docs/spec.md), and say them in their docstrings."""

import inspect

import dataecho as de
from dataecho import _spec_options

# Keywords of the Python API that are not spec options, and spec options that Python takes
# another way.
PYTHON_ONLY = {"pack": {"reads"}, "map": {"as_numpy"}}
TAKEN_OTHERWISE = {"map": {"args"}, "filter": {"args"}}


def keywords(fn):
    params = list(inspect.signature(fn).parameters.values())
    named = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"}
    return named, any(p.kind == p.VAR_KEYWORD for p in params)


def declared(group, name):
    return {row[0] for row in _spec_options.OPTIONS[group][name]}


def check(group, name, fn):
    named, rest = keywords(fn)
    options = declared(group, name) - TAKEN_OTHERWISE.get(name, set())
    named -= PYTHON_ONLY.get(name, set())
    assert named <= options, f"{name}: keywords {sorted(named - options)} are not declared options"
    if not rest or name in TAKEN_OTHERWISE:
        assert options <= named, f"{name}: declared options {sorted(options - named)} have no keyword"


def test_every_stage_method_takes_the_declared_options():
    stages = _spec_options.OPTIONS["stages"]
    assert {"batch", "shuffle", "echo", "pack", "bucket", "map", "cache"} <= set(stages)
    for name in stages:
        assert hasattr(de.PipelineDef, name), f"stage {name} has no PipelineDef method"
        check("stages", name, getattr(de.PipelineDef, name))


def test_every_source_function_takes_the_declared_options():
    for name in _spec_options.OPTIONS["sources"]:
        check("sources", name, getattr(de, name))


def test_docstrings_list_the_declared_options_and_functions():
    assert "``length``: tokens per block; an integer in [1, 16777216]; required." in de.PipelineDef.pack.__doc__
    assert "``on_error``" in de.tfrecord.__doc__
    for fn in _spec_options.OPTIONS["map_functions"]:
        assert f"``{fn}``:" in de.PipelineDef.map.__doc__


def test_a_size_beyond_its_bound_is_refused_before_anything_runs():
    with __import__("pytest").raises(de.SpecError, match=r"\$\.stages\[0\]\.length: expected an integer in \[1, 16777216\]"):
        de.range(4).pack(2**40).build()
    with __import__("pytest").raises(de.SpecError, match=r"\$\.stages\[0\]\.size: expected an integer in \[1, 16777216\]"):
        de.range(4).padded_batch(2**40).build()
