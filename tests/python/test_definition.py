"""The package's PipelineDef is the bound C++ definition: every builder and editing
method gives the spec the C++ builder writes and round-trips through to_spec/from_spec;
options, stats and advice cross the binding as dicts; shared buffers opt in."""

import json
import pydoc

import numpy as np
import pytest
import torch

import dataecho as de
from dataecho import _core

BUILDERS = {
    "map": (lambda d: d.map("augment", flip=True, parallelism="auto", deterministic=False, buffer=8),
            {"op": "map", "fn": "augment", "args": {"flip": True}, "parallelism": "auto",
             "deterministic": False, "buffer": 8}),
    "filter": (lambda d: d.filter("nonempty", field="value"),
               {"op": "filter", "fn": "nonempty", "args": {"field": "value"}}),
    "interleave": (lambda d: d.interleave(2, parallelism="auto", buffer_per_shard=3),
                   {"op": "interleave", "cycle": 2, "parallelism": "auto", "buffer_per_shard": 3}),
    "shuffle": (lambda d: d.shuffle(16, seed=3, reshuffle_each_iteration=False),
                {"op": "shuffle", "buffer": 16, "seed": 3, "reshuffle_each_iteration": False}),
    "echo": (lambda d: d.echo(2.5, seed=1), {"op": "echo", "factor": 2.5, "seed": 1}),
    "echo_int": (lambda d: d.echo(2.0), {"op": "echo", "factor": 2}),
    "echo_adaptive": (lambda d: d.echo("adaptive", max_factor=3, buffer=64, buffer_bytes=0),
                      {"op": "echo", "factor": "adaptive", "max_factor": 3, "buffer": 64, "buffer_bytes": 0}),
    "echo_auto": (lambda d: d.echo("auto", max_factor=2.5),
                  {"op": "echo", "factor": "auto", "max_factor": 2.5}),
    "batch": (lambda d: d.batch(4, drop_remainder=True), {"op": "batch", "size": 4, "drop_remainder": True}),
    "prefetch": (lambda d: d.prefetch("auto"), {"op": "prefetch", "buffer": "auto"}),
    "repeat": (lambda d: d.repeat(3), {"op": "repeat", "count": 3}),
    "take": (lambda d: d.take(5), {"op": "take", "count": 5}),
    "skip": (lambda d: d.skip(2), {"op": "skip", "count": 2}),
    "shard": (lambda d: d.shard(3, 1), {"op": "shard", "num_shards": 3, "index": 1}),
    "stage": (lambda d: d.stage("batch", size=2), {"op": "batch", "size": 2}),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_builder_writes_the_cpp_spec_and_round_trips(name):
    make, stage = BUILDERS[name]
    base = de.range(40, shards=4)
    d = make(base)
    spec = d.to_spec()
    assert spec == {"source": {"kind": "range", "count": 40, "shards": 4}, "stages": [stage]}
    assert de.PipelineDef.from_spec(spec) == d
    assert de.PipelineDef.from_spec(json.loads(json.dumps(spec))).to_spec() == spec
    assert base.stages == [], "a builder method changed the definition it was called on"


def test_pipeline_settings_round_trip():
    d = de.range(10).seed(7).deterministic(False).autotune(cpu_budget=1.5, ram_budget_mb=64)
    spec = d.to_spec()
    assert spec["seed"] == 7 and spec["deterministic"] is False
    assert spec["autotune"] == {"cpu_budget": 1.5, "ram_budget_mb": 64}
    assert de.PipelineDef.from_spec(spec) == d


def test_edits_are_the_cpp_edits():
    d = de.range(100).echo(2).shuffle(8).echo(3).batch(4)
    assert d.find("echo") == 0 and d.find("echo", start=1) == 2 and d.find("repeat") is None
    assert d.count("echo") == 2
    assert [s["op"] for s in d.without("echo").stages] == ["shuffle", "batch"]
    assert d.replacing("shuffle", [{"op": "take", "count": 3}]).stages[1] == {"op": "take", "count": 3}
    assert [s["op"] for s in d.inserting(0, [{"op": "skip", "count": 1}]).stages][:2] == ["skip", "echo"]
    assert [s["op"] for s in d.inserting_after(3, [{"op": "prefetch", "buffer": 2}]).stages][-1] == "prefetch"
    assert d.with_option(3, "size", 16).stages[3] == {"op": "batch", "size": 16}
    assert d.with_shard_first(2, 1).stages[0] == {"op": "shard", "num_shards": 2, "index": 1}
    mixed = d.seed(5).with_mixed_seed(1, 2)
    assert mixed == d.seed(5).with_mixed_seed(1, 2) and 0 <= mixed.to_spec()["seed"] < 2**63
    assert mixed != d.seed(5).with_mixed_seed(2, 1)
    assert len(d.stages) == 4, "an edit changed the definition it was called on"


def test_edit_errors_name_the_stage_path():
    d = de.range(10).batch(2)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[5\]"):
        d.with_option(5, "size", 3)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\] \(shard\)"):
        d.shard(2, 0).with_shard_first(2, 1)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.factor.*\"sometimes\""):
        d.echo("sometimes")
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.parallelism"):
        d.map("augment", parallelism="many")
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.args\.bad.*object"):
        d.map("augment", bad=object())
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.size"):
        next(d.batch(0).build())


def test_no_json_text_crosses_the_binding():
    with de.range(20).batch(5).build() as p:
        next(p)
        assert isinstance(p._p.stats(), list) and all(isinstance(n, dict) for n in p._p.stats())
        assert isinstance(p._p.tuning(), dict)
        assert isinstance(p._p.save(), bytes)
    assert isinstance(de.range(3).batch(2)._d.to_json(), dict)
    assert not [n for n in dir(_core) if "json" in n.lower()]


def test_a_python_map_keeps_zero_d_arrays_scalars():
    d = de.range(6).map(lambda f: {"value": np.asarray(f["value"]) * 2}, as_numpy=True).batch(3)
    b = next(d.build(as_numpy=True))
    assert b["value"].shape == (3,) and list(b["value"]) == [0, 2, 4]


def test_help_shows_the_docstrings():
    text = pydoc.render_doc(de.PipelineDef, renderer=pydoc.plaintext)
    assert "Stacks ``size`` elements" in text and "with_shard_first" in text
    assert "running pipeline" in pydoc.render_doc(de.Pipeline, renderer=pydoc.plaintext)


# ------------------------------------------------------------------ shared buffers
def test_shared_buffers_are_handed_over_without_a_copy_when_asked():
    copied0, _ = _core.copy_counters()
    rows = list(de.range(64).batch(8).echo(2).build(as_numpy=True, share_buffers=True))
    assert len(rows) == 16 and _core.copy_counters()[0] == copied0
    first, repeat = rows[0], rows[1]
    assert first.addresses["value"] == repeat.addresses["value"]  # one buffer, twice
    assert not repeat["value"].flags.writeable
    with pytest.raises(ValueError):
        repeat["value"] += 1
    t = [b for b in de.range(64).batch(8).echo(2).build(share_buffers=True)][:2]
    assert t[0]["value"].data_ptr() == t[1]["value"].data_ptr()
    # The default copies an echoed batch, so its repeat has a buffer of its own.
    d = [b for b in de.range(64).batch(8).echo(2).build()][:2]
    assert d[0]["value"].data_ptr() != d[1]["value"].data_ptr()
    assert _core.copy_counters()[0] > copied0


def test_check_shared_names_the_echo_stage_when_a_shared_buffer_was_written(monkeypatch):
    monkeypatch.setenv("DATAECHO_CHECK_SHARED", "1")
    p = de.range(64).batch(8).echo(2).build(share_buffers=True)
    b = next(p)
    b["value"].add_(1)  # a torch tensor over the shared buffer: written before its repeat
    with pytest.raises(de.SpecError, match=r"2:echo.*written before the echo stage") as e:
        next(p)
    assert e.value.stage == "2:echo"
    p.close()
    # Nothing written: every repeat passes the check.
    assert len(list(de.range(64).batch(8).echo(3).build(share_buffers=True))) == 24
    # Without the variable nothing is checked (the documented promise is the user's).
    monkeypatch.delenv("DATAECHO_CHECK_SHARED")
    p = de.range(64).batch(8).echo(2).build(share_buffers=True)
    next(p)["value"].add_(1)
    assert int(next(p)["value"][0]) == 1


# ------------------------------------------------------------------ cache
def test_cache_from_python_in_memory_and_on_disk(tmp_path):
    d = de.range(12).cache().repeat(3)
    assert d.stages[0] == {"op": "cache"}
    p = d.build(as_numpy=True)
    assert [int(b["value"]) for b in p] == list(range(12)) * 3
    assert p.stats()["1:cache"]["counters"]["hits"] == 24
    disk = de.range(12).cache(tmp_path, max_bytes=None)
    assert disk.to_spec()["stages"][0] == {"op": "cache", "path": str(tmp_path)}
    assert [int(b["value"]) for b in disk.build(as_numpy=True)] == list(range(12))
    assert len(list(tmp_path.glob("cache-*.decache"))) == 1
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\].*shuffle after the cache"):
        de.range(12).shuffle(4).cache().build()
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.key"):
        de.range(12).map(lambda f: f, as_numpy=True).cache(tmp_path).build()


# ------------------------------------------------------------------ sequences
def test_sequence_stages_from_python(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} " + "x" * (i % 7) + "\n" for i in range(40)))
    d = (de.text(str(corpus)).map("tokenize", tokenizer="bytes")
         .pack(32).padded_batch(4).unbatch())
    spec = d.to_spec()
    assert [s["op"] for s in spec["stages"]] == ["map", "pack", "padded_batch", "unbatch"]
    assert de.PipelineDef.from_spec(spec) == d
    blocks = list(d.build(as_numpy=True))
    assert blocks and all(b["tokens"].shape == (32,) for b in blocks)
    # With reads, each block also says its sequences' epochs and echo indices.
    echoed = de.text(str(corpus)).repeat(2).map("tokenize", tokenizer="bytes").echo(2).pack(32, reads=True)
    assert echoed.to_spec()["stages"][-1] == {"op": "pack", "length": 32, "epochs_field": "epochs",
                                              "echoes_field": "echoes"}
    first = next(echoed.build(as_numpy=True))
    assert list(first["epochs"]) == [0] * len(first["ids"])
    assert sorted(set(first["echoes"])) == [0, 1] and len(first["ids"]) >= 2
    b = next(de.text(str(corpus)).map("tokenize", tokenizer="bytes")
             .bucket([8, 16], [4, 4, 4]).build(as_numpy=True))
    assert b["tokens"].shape[0] == 4 and b["tokens_length"].shape == (4,)
