"""Errors become the documented Python exceptions; Ctrl-C, close and del leave no threads;
Python callables as map functions."""

import gc
import os
import pickle
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest
import torch

import dataecho as de
from conftest import IMAGES, LABELS, ROOT


def threads():
    return len(os.listdir("/proc/self/task"))


def test_a_bad_spec_raises_spec_error_with_its_json_path():
    with pytest.raises(de.SpecError, match=r"\$\.stages\[1\]\.size"):
        de.range(10).shuffle(4).batch(0).build()
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.fn.*unknown map function \"nope\""):
        de.range(10).map("nope").build()
    with pytest.raises(de.SpecError, match=r"\$\.source\.kind"):
        de.Pipeline.from_spec({"source": {"kind": "bogus"}, "stages": []})
    with pytest.raises(ValueError):  # SpecError is a ValueError
        de.range(-1).build()


def test_a_corrupt_record_raises_data_error_naming_file_and_offset(shards, tmp_path):
    data = bytearray((shards / "tfrecord" / "train-00000-of-00004.tfrecord").read_bytes())
    data[5000] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    p = de.tfrecord(str(bad)).build()
    got = []
    with pytest.raises(de.DataError) as e:
        for b in p:
            got.append(b)
    assert "bad.tfrecord" in str(e.value) and "byte" in str(e.value)
    assert e.value.code == "data loss" and "bad.tfrecord" in e.value.input
    assert len(got) > 0  # the records before it were delivered
    assert next(p, None) is None  # the stream is over


def test_a_python_map_function_runs_and_its_exception_keeps_its_traceback():
    def add_square(x):
        return {"square": x["value"] * x["value"], "half": x["value"].double() / 2}

    out = [b for b in de.range(6).map(add_square).batch(3).build()]
    assert out[1]["square"].tolist() == [9, 16, 25]
    assert out[1]["half"].dtype == torch.float64 and out[0]["value"].tolist() == [0, 1, 2]

    def numpy_fn(x):
        assert isinstance(x["value"], np.ndarray)
        return {"value": x["value"] + 1}

    assert [int(b["value"]) for b in de.range(3).map(numpy_fn, as_numpy=True).build()] == [1, 2, 3]

    def explode(x):
        if int(x["value"]) == 4:
            raise KeyError("no such thing")
        return {}

    p = de.range(10).map(explode).prefetch(2).build()
    seen = []
    with pytest.raises(KeyError, match="no such thing") as e:
        for b in p:
            seen.append(int(b["value"]))
    assert seen == [0, 1, 2, 3]
    frames = [f.name for f in traceback.extract_tb(e.value.__traceback__)]
    assert "explode" in frames


def test_a_python_callable_has_no_spec_and_its_state_does_not_pickle():
    def my_augment(x):
        return x

    d = de.range(10).map(my_augment).batch(2)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\]\.fn.*my_augment"):
        d.to_spec()
    p = d.build()
    next(p)
    state = p.state_dict()
    with pytest.raises(de.SpecError, match="my_augment"):
        pickle.dumps(state)
    q = d.build()
    q.load_state_dict(state)  # in this process it restores
    assert next(q).ids == [2, 3]


def test_close_del_and_with_leave_no_threads():
    gc.collect()
    start = threads()
    d = de.idx(IMAGES, LABELS).map("augment", flip=True, parallelism=2).batch(16).prefetch(4)
    p = d.build()
    next(p)
    assert threads() > start
    del p
    gc.collect()
    assert threads() == start
    with d.build() as p:
        next(p)
    assert threads() == start and p.closed
    q = d.build()
    next(q)
    q.close()
    q.close()
    assert threads() == start and next(q, None) is None


# next() runs the pipeline on the calling thread; a SIGINT cancels it through the engine's
# watcher (the default handler), or next() waits for a puller thread and runs the program's
# own handler every 50 ms (src/python/pipeline.h). Both ways the pipeline stops within a
# second, and its threads are joined.
@pytest.mark.parametrize("pipeline,handler", [
    # the caller waits on prefetch; map threads sleep
    ('de.range(1000).map("sleep", ms=20000, parallelism=2).prefetch(2)', "default"),
    # the caller itself sleeps inside the map
    ('de.range(1000).map("sleep", ms=20000)', "default"),
    # a program's own handler, raising its own exception: the puller path
    ('de.range(1000).map("sleep", ms=20000)', "own"),
])
def test_ctrl_c_stops_within_a_second_and_joins_the_threads(pipeline, handler):
    script = textwrap.dedent(f"""
        import os, signal, threading, time, sys
        import dataecho as de
        class Stop(Exception):
            pass
        def own(signum, frame):
            raise Stop()
        if "{handler}" == "own":
            signal.signal(signal.SIGINT, own)
        expected = Stop if "{handler}" == "own" else KeyboardInterrupt
        start = len(os.listdir("/proc/self/task"))
        p = {pipeline}.build()
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            next(p)
            print("no interrupt"); sys.exit(1)
        except expected:
            took = time.monotonic() - t0 - 0.5
        time.sleep(0.1)  # the Timer thread ends
        print(f"took {{took:.3f}} threads {{len(os.listdir('/proc/self/task')) - start}}")
        assert took < 1.0, took
        assert p.closed
        assert len(os.listdir("/proc/self/task")) == start
        # After it, Ctrl-C is Python's again: no engine handler is left installed.
        if "{handler}" == "default":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
                print("no KeyboardInterrupt outside next()"); sys.exit(1)
            except KeyboardInterrupt:
                pass
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr


def test_next_from_another_thread_and_in_a_forked_child():
    """Off the main thread next() runs inline without the SIGINT watch; a forked child
    starts its own watcher, and Ctrl-C there still stops a waiting next()."""
    script = textwrap.dedent("""
        import os, signal, threading, time, sys
        import dataecho as de
        got = []
        t = threading.Thread(target=lambda: got.extend(int(b["value"]) for b in de.range(50).build()))
        t.start(); t.join()
        assert got == list(range(50)), got
        pid = os.fork()
        if pid == 0:
            p = de.range(10).map("sleep", ms=20000).build()
            threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            try:
                next(p)
                os._exit(1)
            except KeyboardInterrupt:
                os._exit(0 if p.closed else 2)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, status
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr


def test_torch_dataloader_workers_share_the_files_without_duplicates(shards):
    from torch.utils.data import DataLoader

    d = de.tfrecord(str(shards / "tfrecord" / "train-*.tfrecord")).map("decode_image").batch(10)
    alone = sorted(i for b in d.build() for i in b.ids)
    assert len(alone) == 600 == len(set(alone))
    for workers in (0, 2, 3):
        # Workers are processes: a batch comes back as a plain dict, so the ids travel as a
        # field ("__ids__").
        loader = DataLoader(de.TorchIterable(d, provenance=True), batch_size=None, num_workers=workers)
        ids = [int(i) for b in loader for i in b["__ids__"]]
        assert sorted(ids) == alone, f"{workers} workers"
        first = next(iter(loader))
        assert first["image"].shape[0] == 10 and first["__echo__"].tolist() == [0] * 10


def test_a_pipeline_iterated_inside_another_ones_python_function():
    """A next() inside a watched next() (on the main thread) runs unwatched; Ctrl-C
    afterwards is still Python's, and no handler is left chained to itself."""
    script = textwrap.dedent("""
        import os, signal, time, sys
        import dataecho as de
        def inner_sum(fields):
            fields["inner"] = sum(int(b["value"]) for b in de.range(5).build())
            return fields
        got = [int(b["inner"]) for b in de.range(3).map(inner_sum).build()]
        assert got == [10, 10, 10], got
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
            sys.exit(1)
        except KeyboardInterrupt:
            pass
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
