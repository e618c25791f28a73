"""The Python package's methods and source functions take exactly the options the engine
declares (include/dataecho/spec/schema.h, docs/spec.md), and say them in their docstrings."""

import inspect

import pytest

import dataecho as de
from dataecho import _spec_options

# Keywords of the Python API that are not spec options, and spec options that Python takes
# another way.
PYTHON_ONLY = {"pack": {"reads"}, "map": {"as_numpy"}}
# elastic: TorchIterable sets the consumers and lane counts of each DataLoader worker.
TAKEN_OTHERWISE = {"map": {"args"}, "filter": {"args"},
                   "elastic": {"consumers_per_rank", "consumer", "lane_counts"}}


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


def test_distribute_takes_the_service_sources_options_but_its_pipeline():
    named, rest = keywords(de.PipelineDef.distribute)
    assert not rest and named == declared("sources", "service") - {"pipeline"}
    assert "``sharding``: " in de.PipelineDef.distribute.__doc__
    assert "``pipeline``: " not in de.PipelineDef.distribute.__doc__


def test_docstrings_list_the_declared_options_and_functions():
    assert "``length``: tokens per block; an integer in [1, 16777216]; required." in de.PipelineDef.pack.__doc__
    assert "``on_error``" in de.tfrecord.__doc__
    for fn in _spec_options.OPTIONS["map_functions"]:
        assert f"``{fn}``:" in de.PipelineDef.map.__doc__


def test_a_size_beyond_its_bound_is_refused_before_anything_runs():
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.length: expected an integer in \[1, 16777216\]"):
        de.range(4).pack(2**40).build()
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.size: expected an integer in \[1, 16777216\]"):
        de.range(4).padded_batch(2**40).build()


# Each stage method's spec, as the methods wrote it through their own bindings before the
# declarations made it (so the state fingerprints of Python-made pipelines did not move).
B = de.range(8, shards=4)
WRITTEN = [
    (B.map("identity"),
     {'fn': 'identity', 'op': 'map'}),
    (B.map("burn", iterations=3),
     {'args': {'iterations': 3}, 'fn': 'burn', 'op': 'map'}),
    (B.map("identity", parallelism=2, deterministic=False, buffer=4),
     {'buffer': 4, 'deterministic': False, 'fn': 'identity', 'op': 'map', 'parallelism': 2}),
    (B.map("identity", parallelism=1, deterministic=True, buffer=0),
     {'buffer': 0, 'deterministic': True, 'fn': 'identity', 'op': 'map'}),
    (B.map("identity", parallelism="auto"),
     {'fn': 'identity', 'op': 'map', 'parallelism': 'auto'}),
    (B.filter("id_mod", mod=2),
     {'args': {'mod': 2}, 'fn': 'id_mod', 'op': 'filter'}),
    (B.filter("even"),
     {'fn': 'even', 'op': 'filter'}),
    (B.interleave(),
     {'cycle': 4, 'op': 'interleave'}),
    (B.interleave(2, parallelism="auto", buffer_per_shard=3),
     {'buffer_per_shard': 3, 'cycle': 2, 'op': 'interleave', 'parallelism': 'auto'}),
    (B.interleave(4, parallelism=0),
     {'cycle': 4, 'op': 'interleave', 'parallelism': 0}),
    (B.shuffle(10),
     {'buffer': 10, 'op': 'shuffle'}),
    (B.shuffle(10, seed=3, reshuffle_each_iteration=True),
     {'buffer': 10, 'op': 'shuffle', 'reshuffle_each_iteration': True, 'seed': 3}),
    (B.shuffle(10, reshuffle_each_iteration=False),
     {'buffer': 10, 'op': 'shuffle', 'reshuffle_each_iteration': False}),
    (B.echo(),
     {'factor': 2, 'op': 'echo'}),
    (B.echo(2.0),
     {'factor': 2, 'op': 'echo'}),
    (B.echo(2.5, seed=1),
     {'factor': 2.5, 'op': 'echo', 'seed': 1}),
    (B.echo("adaptive", max_factor=3.0, buffer=8, buffer_bytes=0),
     {'buffer': 8, 'buffer_bytes': 0, 'factor': 'adaptive', 'max_factor': 3, 'op': 'echo'}),
    (B.echo("auto", max_factor=6),
     {'factor': 'auto', 'max_factor': 6, 'op': 'echo'}),
    (B.batch(4),
     {'op': 'batch', 'size': 4}),
    (B.batch(4, drop_remainder=False),
     {'op': 'batch', 'size': 4}),
    (B.batch(4, drop_remainder=True),
     {'drop_remainder': True, 'op': 'batch', 'size': 4}),
    (B.prefetch(),
     {'buffer': 2, 'op': 'prefetch'}),
    (B.prefetch("auto"),
     {'buffer': 'auto', 'op': 'prefetch'}),
    (B.prefetch(2),
     {'buffer': 2, 'op': 'prefetch'}),
    (B.cache(),
     {'op': 'cache'}),
    (B.cache("/tmp/c", key="k", max_bytes=0, on_full="prefix", allow_shuffled=True),
     {'allow_shuffled': True, 'key': 'k', 'max_bytes': 0, 'on_full': 'prefix', 'op': 'cache', 'path': '/tmp/c'}),
    (B.cache(max_bytes=10, on_full="fail", allow_shuffled=False),
     {'max_bytes': 10, 'op': 'cache'}),
    (B.padded_batch(2),
     {'op': 'padded_batch', 'size': 2}),
    (B.padded_batch(2, drop_remainder=True, fields={"tokens": {"length": 8}}, lengths=False),
     {'drop_remainder': True, 'fields': {'tokens': {'length': 8}}, 'lengths': False, 'op': 'padded_batch', 'size': 2}),
    (B.padded_batch(2, lengths=True, fields={"tokens": {}}),
     {'fields': {'tokens': {}}, 'op': 'padded_batch', 'size': 2}),
    (B.unbatch(),
     {'op': 'unbatch'}),
    (B.pack(8),
     {'length': 8, 'op': 'pack'}),
    (B.pack(8, eos_id=1, pad_id=0, drop_remainder=True, reads=True),
     {'drop_remainder': True, 'echoes_field': 'echoes', 'eos_id': 1, 'epochs_field': 'epochs', 'length': 8, 'op': 'pack', 'pad_id': 0}),
    (B.pack(8, field="t", document_field="d", ids_field="i", epochs_field="e", echoes_field="x"),
     {'document_field': 'd', 'echoes_field': 'x', 'epochs_field': 'e', 'field': 't', 'ids_field': 'i', 'length': 8, 'op': 'pack'}),
    (B.pack(8, reads=True, epochs_field="e"),
     {'echoes_field': 'echoes', 'epochs_field': 'e', 'length': 8, 'op': 'pack'}),
    (B.bucket([4, 8], [2, 2, 2]),
     {'batch_sizes': [2, 2, 2], 'boundaries': [4, 8], 'op': 'bucket'}),
    (B.bucket([]),
     {'boundaries': [], 'op': 'bucket'}),
    (B.bucket([4], token_budget=64, field="t", drop_remainder=True, fields={"t": {"multiple": 8}}, lengths=False),
     {'boundaries': [4], 'drop_remainder': True, 'field': 't', 'fields': {'t': {'multiple': 8}}, 'lengths': False, 'op': 'bucket', 'token_budget': 64}),
    (B.bucket((4,), (2, 2), drop_remainder=False, lengths=True),
     {'batch_sizes': [2, 2], 'boundaries': [4], 'op': 'bucket'}),
    (B.repeat(),
     {'count': -1, 'op': 'repeat'}),
    (B.repeat(3),
     {'count': 3, 'op': 'repeat'}),
    (B.take(2),
     {'count': 2, 'op': 'take'}),
    (B.skip(2),
     {'count': 2, 'op': 'skip'}),
    (B.shard(2, 1),
     {'index': 1, 'num_shards': 2, 'op': 'shard'}),
]


def test_each_method_writes_the_spec_it_always_wrote():
    for made, stage in WRITTEN:
        assert made.stages == [stage]


def test_lists_of_fields_and_paths_pass_as_the_spec_takes_them(tmp_path):
    assert B.padded_batch(2, fields=["tokens"]).stages == [{"op": "padded_batch", "size": 2, "fields": ["tokens"]}]
    assert B.bucket((4,), fields=("t",)).stages == [{"op": "bucket", "boundaries": [4], "fields": ["t"]}]
    assert B.cache(tmp_path).stages == [{"op": "cache", "path": str(tmp_path)}]


def test_a_wrong_type_is_refused_when_the_stage_is_made():
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.size: expected an integer in \[1, 16777216\], got string"):
        B.batch("4")
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.on_full: expected one of \"fail\" or \"prefix\""):
        B.cache(on_full="sometimes")
