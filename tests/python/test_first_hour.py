"""What a user reaches for in the first hour: typos named with what was meant, a warning
before a buffer takes gigabytes, the files source's paths, which input of a sample an
element came from (and a clear error when the inputs disagree), text shown as text, and
profile for a language model's pipeline."""
import json
import subprocess
import sys

import numpy as np
import pytest

import dataecho as de


def pipe(dataecho_bin, spec, tmp_path, *args):
    f = tmp_path / "spec.json"
    f.write_text(json.dumps(spec))
    return subprocess.run([dataecho_bin, "pipe", str(f), *args], capture_output=True, text=True)


# ---- typos -----------------------------------------------------------------------------
def test_a_misspelt_option_is_named_with_what_was_meant():
    with pytest.raises(de.SpecError, match=r'\$\.stages\[0\]\.buffer: missing.*"bufer": a misspelling of "buffer"'):
        de.PipelineDef.from_spec({"source": {"kind": "range", "count": 3},
                                  "stages": [{"op": "shuffle", "bufer": 4}]}).build()
    with pytest.raises(de.SpecError, match=r'unknown op "shufle"; did you mean "shuffle"\?'):
        de.range(3).stage("shufle", buffer=4).build()
    with pytest.raises(de.SpecError, match=r'unknown map function "decode_agment"; did you mean "decode_augment"\?'):
        de.range(3).map("decode_agment").build()
    with pytest.raises(de.SpecError, match=r'args\.flipp: unknown field; did you mean "flip"\?'):
        de.range(3).map("augment", flipp=True).build()


def test_the_known_lists_have_the_optional_options():
    with pytest.raises(de.SpecError) as e:
        de.range(3).stage("shuffle", buffer=2, sead=1).build()
    assert 'did you mean "seed"?' in str(e.value)
    assert "reshuffle_each_iteration" in str(e.value)


def test_a_misspelt_command(dataecho_bin):
    r = subprocess.run([dataecho_bin, "piep"], capture_output=True, text=True)
    assert r.returncode == 2
    assert 'dataecho: unknown command "piep"; did you mean "pipe"?' in r.stderr
    assert "convert" in r.stderr
    r = subprocess.run([dataecho_bin, "bench", "raed"], capture_output=True, text=True)
    assert 'bench unknown command "raed"; did you mean "read"?' in r.stderr
    r = subprocess.run([dataecho_bin], capture_output=True, text=True)
    assert r.returncode == 2 and "a command is required (pipe, convert" in r.stderr


# ---- memory ----------------------------------------------------------------------------
def test_a_buffer_over_the_memory_share_is_named_with_its_estimate(capfd):
    # 100 batches of 1,000 int64 (8 KB each) into a shuffle of 100: 800 KB, over 0.5 MiB.
    d = de.range(100_000).batch(1000).shuffle(100).memory_check(limit_mb=0.5)
    assert len(list(d.build(as_numpy=True))) == 100
    err = capfd.readouterr().err
    assert "dataecho: warning: 2:shuffle: its buffer of 100 elements of about 8.0 KB each" in err
    assert err.count("warning") == 1
    with pytest.raises(de.Error, match="memory_check: 2:shuffle"):
        list(d.memory_check(limit_mb=0.5, action="error").build(as_numpy=True))


def test_the_docs_old_snippet_is_refused_when_built(shards):
    # decode_augment's 224 crops in a shuffle of 10,000: 2 GB at least (one channel),
    # known before anything is read.
    d = (de.tfrecord(str(shards / "tfrecord" / "train-*.tfrecord"))
         .map("decode_augment", random_resized_crop=224, normalize=True)
         .echo(2).shuffle(10_000).memory_check(share=0.01, action="error"))
    with pytest.raises(de.Error, match=r"3:shuffle: its buffer of 10000 elements of about 201 KB each "
                                       r"\(decode_augment's random_resized_crop, float32, at least one channel\)"):
        d.build()


# ---- the files source's paths, sample's inputs -------------------------------------------
def make_folder(root):
    from PIL import Image

    for i in range(6):
        d = root / f"c{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((8, 8, 3), i * 40, np.uint8)).save(d / f"{i}.png")


def test_files_gives_each_files_path(tmp_path):
    make_folder(tmp_path / "train")
    rows = list(de.files(tmp_path / "train", path=True).build(as_numpy=True))
    assert [bytes(r["path"]).decode() for r in rows] == ["c0/0.png", "c0/2.png", "c0/4.png",
                                                         "c1/1.png", "c1/3.png", "c1/5.png"]
    assert [int(r["label"]) for r in rows] == [0, 0, 0, 1, 1, 1]


def test_sample_says_which_input_and_refuses_inputs_with_other_fields(tmp_path, shards):
    a, b = de.range(50), de.range(50)
    got = list(de.sample([a, b], [0.5, 0.5], seed=3, input_field="input").build(as_numpy=True))
    assert sorted({int(e["input"]) for e in got}) == [0, 1] and len(got) == 100
    tar = de.tar(str(shards / "tar" / "train-*.tar"))
    tfr = de.tfrecord(str(shards / "tfrecord" / "train-*.tfrecord"))
    with pytest.raises(de.Error) as e:
        list(de.sample([tfr, tar], [0.5, 0.5], seed=1).build(as_numpy=True))
    assert not isinstance(e.value, de.SpecError)
    msg = str(e.value)  # whichever input came first is the one the other is compared with
    assert msg.startswith("0:sample: input ") and "(cls, png)" in msg and "(image, image/format" in msg
    assert "input 0" in msg and "input 1" in msg and "must give the same fields" in msg


# ---- text shown as text ----------------------------------------------------------------------
def test_pipe_values_shows_text_as_text(dataecho_bin, tmp_path):
    (tmp_path / "a.txt").write_text("héllo world\nsecond line\n")
    r = pipe(dataecho_bin, {"source": {"kind": "text", "uri": str(tmp_path / "a.txt")}}, tmp_path, "--values")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["fields"]["text"]["text"] for x in lines] == ["héllo world", "second line"]
    # Bytes that are not text stay numbers.
    r = pipe(dataecho_bin, {"source": {"kind": "range", "count": 2},
                            "stages": [{"op": "map", "fn": "decode_image"}]}, tmp_path, "--values")
    assert r.returncode != 0 or '"values"' in r.stdout


# ---- profile of a language model's pipeline ---------------------------------------------------
def lm_spec(tmp_path):
    (tmp_path / "corpus.txt").write_text("".join(f"line {i} of a small corpus for the profile\n"
                                                 for i in range(400)))
    return {"seed": 1, "source": {"kind": "text", "uri": str(tmp_path / "corpus.txt")},
            "stages": [{"op": "repeat", "count": -1},
                       {"op": "map", "fn": "tokenize", "args": {"tokenizer": "bytes"}},
                       {"op": "pack", "length": 64}, {"op": "padded_batch", "size": 8, "lengths": False}]}


def test_dataecho_profile_times_a_language_model(dataecho_bin, tmp_path):
    spec = tmp_path / "lm.json"
    spec.write_text(json.dumps(lm_spec(tmp_path)))
    r = subprocess.run([dataecho_bin, "profile", str(spec), "--model", "transformer", "--seconds", "1",
                        "--steps", "3", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["downstream_ms_per_batch"] > 0 and out["R"] > 0
    assert "timing the train step (transformer" in r.stderr


def test_de_profile_of_text_says_what_it_does(tmp_path, capfd):
    d = de.PipelineDef.from_spec(lm_spec(tmp_path))
    out = de.profile(d, lambda b: sum(int(t.sum()) for t in b.values()), seconds=0.5, train_steps=2)
    err = capfd.readouterr().err
    assert "profile: running the pipeline alone for up to 0.5 s" in err
    assert "profile: pipeline alone: " in err and "profile: train step: " in err
    assert out["upstream_ms_per_batch"] > 0
    assert de.profile(d, lambda b: None, seconds=0.2, train_steps=1, progress=False)["batches"] >= 1
    assert "profile:" not in capfd.readouterr().err


def test_the_advice_splits_decode_augment_to_echo_before_augmentation():
    import dataecho._core as core

    d = (de.tfrecord("x.tfrecord").map("decode_augment", random_resized_crop=224, flip=True, channels=3,
                                       parallelism=2).batch(32))
    stats = [{"name": "0:tfrecord", "elements": 64, "rows": 64, "next_ms": 10.0, "busy_ms": 0.0},
             {"name": "1:map", "elements": 64, "rows": 64, "next_ms": 900.0, "busy_ms": 900.0},
             {"name": "2:batch", "elements": 2, "rows": 64, "next_ms": 910.0, "busy_ms": 0.0}]
    a = core.advise(stats, d._d, 2, 455.0, 100.0)
    assert "split 1:map (decode_augment) into decode_image and augment" in a["placement"]
    stages = a["recommended_spec"]["stages"]
    assert [(s["op"], s.get("fn")) for s in stages] == [("map", "decode_image"), ("echo", None),
                                                        ("map", "augment"), ("batch", None)]
    assert stages[0]["args"] == {"channels": 3} and stages[2]["args"] == {"random_resized_crop": 224, "flip": True}
    assert stages[0]["parallelism"] == stages[2]["parallelism"] == 2


def test_pack_takes_the_field_names_docs_text_lists(tmp_path):
    d = de.PipelineDef.from_spec(lm_spec(tmp_path)).without("padded_batch").without("pack")
    d = d.pack(16, document_field="doc", ids_field="seq", reads=True).take(3)
    assert d.stages[-2] == {"op": "pack", "length": 16, "document_field": "doc", "ids_field": "seq",
                            "epochs_field": "epochs", "echoes_field": "echoes"}
    block = next(d.build(as_numpy=True))
    assert {"tokens", "doc", "seq", "epochs", "echoes"} <= set(block)
