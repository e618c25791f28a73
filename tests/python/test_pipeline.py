"""The pipeline from Python: the builder, specs, the same stream as `dataecho pipe`,
zero-copy batches, resume, stats and profile."""

import gc
import json
import pickle
import subprocess
import time

import numpy as np
import pytest
import torch

import dataecho as de
from conftest import IMAGES, LABELS


def pipe_lines(dataecho_bin, spec, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([dataecho_bin, "pipe", "--values", str(path)], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def assert_same_stream(dataecho_bin, definition, tmp_path):
    expected = pipe_lines(dataecho_bin, definition.to_spec(), tmp_path)
    got = list(definition.build(as_numpy=True))
    assert len(got) == len(expected) > 0
    for b, e in zip(got, expected):
        assert b.ids == e["ids"]
        assert b.echo == e["echo"]
        assert sorted(b) == sorted(e["fields"])
        for name, f in e["fields"].items():
            assert list(b[name].shape) == f["shape"]
            assert str(b[name].dtype) == f["dtype"]
            shown = np.ravel(f["values"]) if "values" in f else np.frombuffer(f["text"].encode(), np.uint8)
            np.testing.assert_array_equal(b[name].ravel(), shown)


def test_builder_writes_the_spec_of_the_cpp_builder():
    d = (de.tfrecord("shards/train-{00000..00003}-of-00004.tfrecord",
                     features={"image": "image/encoded", "label": "image/class/label"})
         .map("decode_augment", random_resized_crop=224, flip=True, normalize=True, parallelism=2)
         .echo(2).shuffle(10_000).batch(128).prefetch(4).seed(7))
    assert d.to_spec() == {
        "seed": 7,
        "source": {"kind": "tfrecord", "uri": "shards/train-{00000..00003}-of-00004.tfrecord",
                   "features": {"image": "image/encoded", "label": "image/class/label"}},
        "stages": [
            {"op": "map", "fn": "decode_augment", "parallelism": 2,
             "args": {"random_resized_crop": 224, "flip": True, "normalize": True}},
            {"op": "echo", "factor": 2},
            {"op": "shuffle", "buffer": 10000},
            {"op": "batch", "size": 128},
            {"op": "prefetch", "buffer": 4},
        ],
    }
    assert de.PipelineDef.from_spec(d.to_spec()) == d
    # A definition is a value: stages return new ones.
    base = de.range(10)
    a, b = base.batch(2), base.take(3)
    assert base.stages == [] and "stages" not in base.to_spec() and a != b


@pytest.mark.parametrize("make", [
    lambda s: de.range(50).echo(2.5, seed=3).shuffle(16).batch(8),
    lambda s: de.range(40, shards=4).interleave(2).echo("adaptive", max_factor=1).batch(5, drop_remainder=True),
    lambda s: de.idx(IMAGES, LABELS, limit=64).map("augment", pad_crop=2, flip=True, normalize=True,
                                                   parallelism=2).batch(16),
    lambda s: de.tfrecord(str(s / "tfrecord" / "train-*.tfrecord")).map("decode_image").echo(2).shuffle(32).batch(32),
    lambda s: de.tar(str(s / "tar" / "train-{00000..00003}.tar")).take(20),
], ids=["range", "interleave", "idx", "tfrecord", "tar"])
def test_same_ids_echo_and_values_as_dataecho_pipe(make, shards, dataecho_bin, tmp_path):
    assert_same_stream(dataecho_bin, make(shards).seed(11), tmp_path)


def test_http_source_gives_the_local_stream(shards, http_root, dataecho_bin, tmp_path):
    remote = de.tfrecord(http_root + "/tfrecord/train-{00000..00003}-of-00004.tfrecord").map("decode_image").batch(50)
    local = de.tfrecord(str(shards / "tfrecord" / "train-{00000..00003}-of-00004.tfrecord")).map("decode_image").batch(50)
    assert_same_stream(dataecho_bin, remote, tmp_path)
    for r, l in zip(remote.build(), local.build()):
        assert r.ids == l.ids and torch.equal(r["image"], l["image"])


def test_every_example_spec_builds_from_python(dataecho_bin):
    from conftest import ROOT
    for path in sorted((ROOT / "examples").glob("*.json")):
        spec = json.loads(path.read_text())
        if "source" not in spec:
            continue  # a training config, not a pipeline
        d = de.PipelineDef.from_spec(path)
        assert d.to_spec() == spec
        if "../out/" in json.dumps(spec["source"]):
            continue  # data a script makes first (scripts/gcide_split.py): not here
        with d.build() as p:
            assert next(p) is not None


def test_batches_are_torch_tensors_over_the_pipeline_buffers():
    p = de.idx(IMAGES, LABELS, limit=256).map("normalize").batch(64).build()
    b = next(p)
    assert b["image"].dtype == torch.float32 and list(b["image"].shape) == [64, 1, 28, 28]
    assert b["label"].dtype == torch.int64 and list(b["label"].shape) == [64]
    # Zero-copy: the tensor's memory is the engine's buffer.
    assert b["image"].data_ptr() == b.addresses["image"]
    assert b["label"].data_ptr() == b.addresses["label"]
    # numpy arrays likewise view the buffer.
    n = next(de.idx(IMAGES, LABELS, limit=256).map("normalize").batch(64).build(as_numpy=True))
    assert n["image"].__array_interface__["data"][0] == n.addresses["image"]
    assert n["image"].dtype == np.float32 and n["image"].flags.writeable
    kept = b["image"].clone()
    p.close()
    del p
    gc.collect()
    assert torch.equal(b["image"], kept)  # the tensor outlives the pipeline


def test_in_place_ops_never_change_a_later_batch():
    # Batch echoing repeats one buffer: what Python gets must be its own.
    p = de.range(64).batch(8).echo(3).build()
    seen = []
    for b in p:
        seen.append(b["value"].clone())
        b["value"].sub_(1000)  # in place, on the yielded tensor
    again = [b["value"] for b in de.range(64).batch(8).echo(3).build()]
    assert all(torch.equal(x, y) for x, y in zip(seen, again))
    assert len(seen) == 24 and torch.equal(seen[0], seen[1])
    # Example echoing before a batch: the batch is fresh, handed out without a copy.
    b = next(de.range(64).echo(2).batch(8).build())
    assert b["value"].data_ptr() == b.addresses["value"]
    # numpy arrays likewise.
    for b in de.range(16).batch(4).echo(2).build(as_numpy=True):
        b["value"] += 100
    assert [list(b["value"]) for b in de.range(16).batch(4).echo(2).build(as_numpy=True)][:2] == [[0, 1, 2, 3]] * 2


def test_ten_thousand_batches_leak_nothing():
    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    p = de.idx(IMAGES, LABELS, limit=2000).repeat().batch(32).take(11_000).build()
    for _ in range(1000):
        next(p)
    gc.collect()
    before = rss_kib()
    n = sum(1 for _ in p)
    gc.collect()
    grown = rss_kib() - before
    assert n == 10_000
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 10,000 batches"


def test_state_dict_resumes_exactly_and_pickles():
    d = de.idx(IMAGES, LABELS, limit=500).shuffle(100).echo(2).shuffle(50).map(
        "augment", pad_crop=2, flip=True).batch(32).seed(5)
    full = [(b.ids, b.echo, b["image"].clone()) for b in d.build()]
    p = d.build()
    head = [next(p) for _ in range(7)]
    state = pickle.loads(pickle.dumps(p.state_dict()))
    assert state["elements"] == 7
    q = d.build()
    q.load_state_dict(state)
    rest = [(b.ids, b.echo, b["image"]) for b in q]
    assert len(head) + len(rest) == len(full)
    for (ids, echo, img), (ids2, echo2, img2) in zip(full[7:], rest):
        assert ids == ids2 and echo == echo2 and torch.equal(img, img2)
    # The same pipeline, rewound to a state after iterating further.
    next(p)
    p.load_state_dict(state)
    assert next(p).ids == full[7][0]
    with pytest.raises(de.SpecError, match="fingerprint|another|spec"):
        de.range(5).build().load_state_dict(state)


def test_stats_count_fresh_and_echoed():
    p = de.range(100).echo(3).shuffle(20).batch(10).build()
    assert sum(len(b.ids) for b in p) == 300
    s = p.stats()
    assert list(s) == ["0:range", "1:echo", "2:shuffle", "3:batch"]
    assert s["1:echo"]["counters"] == {"fresh": 100, "echoed": 200}
    assert s["3:batch"]["rows"] == 300
    assert {"busy_ms", "wait_input_ms", "wait_output_ms"} <= set(s["2:shuffle"])


def test_profile_measures_r_and_recommends_an_echo():
    import time
    d = de.range(100_000).map("sleep", ms=0.05, parallelism=1).batch(20).echo(2)

    def step(batch):
        time.sleep(0.0002)

    r = de.profile(d, step, seconds=1.0, train_steps=10)
    assert r["upstream_ms_per_batch"] > r["downstream_ms_per_batch"] > 0
    assert r["r"] > 1.1 and r["recommended_factor"] > 1
    # R is about 5 here; a loaded machine can push it past the cap of 6.
    last = r["recommendations"][-1]
    assert ("echo alone cannot close this gap" in last) if r["factor_capped"] else ("echo with a factor of" in last)
    assert any(st["bottleneck"] for st in r["stages"])
    assert r["slowest_stage"].startswith("1:map")
    assert "right after 1:map" in r["placement"]
    assert [s["op"] for s in r["recommended_spec"]["stages"]] == ["map", "echo", "batch"]


def test_help_says_what_echo_does_and_where_to_place_it():
    doc = de.PipelineDef.echo.__doc__.lower()
    assert "slowest stage" in doc and "before the augmentation" in doc and "batch echoing" in doc


def test_autotune_chooses_within_its_budget_and_keeps_the_output():
    d = (de.range(300).map("sleep", ms=5, parallelism="auto").prefetch("auto")
         .autotune(cpu_budget=1, ram_budget_mb=64))
    assert d.to_spec()["autotune"] == {"cpu_budget": 1, "ram_budget_mb": 64}
    assert d.to_spec()["stages"][0]["parallelism"] == "auto"
    p = d.build()
    ids = [int(e["value"]) for e in p]
    assert ids == list(range(300))  # in order, whatever the tuner did
    t = p.tuning()
    assert t["cpu_budget"] == 1 and t["ram_budget_mb"] == 64
    assert sorted(k["param"] for k in t["knobs"]) == ["buffer", "parallelism"]
    # 300 elements of 5 ms take 1.5 s at parallelism 1: the first window (1 s) raises it.
    assert any(c["param"] == "parallelism" and c["to"] > c["from"] for c in t["changes"]), t
    assert p.stats()["1:map(sleep)"]["values"]["parallelism"] >= 2


def test_echo_auto_fills_the_gap_that_tuning_cannot_close():
    # A fixed stage of 20 ms an element, pulled by a consumer of 5 ms: nothing else can
    # rise, so the tuner lets the echo repeat (the first window: 0.25 s).
    d = de.range(60).map("sleep", ms=20).echo("auto", max_factor=3)
    assert d.to_spec()["stages"][1] == {"op": "echo", "factor": "auto", "max_factor": 3}
    p = d.build()
    out = []
    for e in p:
        out.append(int(e["value"]))
        time.sleep(0.005)
    assert sorted(set(out)) == list(range(60))  # every element, fresh, in order of arrival
    t = p.tuning()
    assert [k["param"] for k in t["knobs"]] == ["max_copies"]
    assert t["knobs"][0]["value"] == 3, t
    assert len(out) > 60  # repeats filled the gap


def test_adaptive_echo_buffers_are_builder_options_and_checked():
    d = de.range(30).echo("adaptive", max_factor=3, buffer=16, buffer_bytes=65536)
    assert d.to_spec()["stages"][0] == {"op": "echo", "factor": "adaptive", "max_factor": 3,
                                        "buffer": 16, "buffer_bytes": 65536}
    fresh = [int(e["value"]) for e in d.build()]
    assert sorted(set(fresh)) == list(range(30))
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.buffer_bytes: only for"):
        de.range(3).echo(2, buffer_bytes=1024).build()
    with pytest.raises(de.SpecError, match=r"buffer_bytes"):
        de.range(3).echo("adaptive", buffer_bytes=-1).build()
