"""The experiments' spec edits through dataecho.PipelineDef (experiments/specs.py) and
the configs made with them (experiments/protocol/adaptive_buffer.py): the edited specs
are the specs the shell scripts used to write by hand, and a spec without the stage an
edit needs is refused naming it."""

import json
import subprocess
import sys
from pathlib import Path

import dataecho
import pytest

from experiments import specs
from experiments.protocol import adaptive_buffer

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "experiments" / "protocol" / "train.json"


def stages(path):
    return json.loads(Path(path).read_text())["stages"]


def test_the_batch_and_an_echo_before_augmentation(tmp_path):
    d = specs.with_each(specs.load_spec(str(TRAIN)), "batch", "size", 64)
    d = specs.with_echo_after(d, "decode_image", 4, 1000)
    want = stages(TRAIN)
    want[5]["size"] = 64
    want[4:4] = [{"op": "echo", "factor": 4}, {"op": "shuffle", "buffer": 1000}]
    assert d.stages == want
    # Factor 1: no echo, the definition as it was.
    plain = specs.load_spec(str(TRAIN))
    assert specs.with_echo_after(plain, "decode_image", 1, 1000) == plain


def test_an_edit_without_its_stage_is_refused():
    d = specs.load_spec(str(TRAIN))
    with pytest.raises(dataecho.SpecError, match="no 'echo' stage to set 'buffer' on"):
        specs.with_each(d, "echo", "buffer", 8)
    with pytest.raises(dataecho.SpecError, match="no map stage of function 'decode_jpeg'"):
        specs.with_echo_after(d, "decode_jpeg", 2, 1000)


def test_every_stage_of_the_op_is_set():
    d = specs.load_spec({"source": {"kind": "range", "count": 10},
                         "stages": [{"op": "echo", "factor": 2}, {"op": "batch", "size": 2},
                                    {"op": "echo", "factor": 3}]})
    assert [s.get("buffer") for s in specs.with_each(d, "echo", "buffer", 8).stages] == [8, None, 8]


def test_the_command_line(tmp_path):
    out = tmp_path / "train-e2-b64.json"
    r = subprocess.run([sys.executable, "-m", "experiments.specs", "edit", str(TRAIN), str(out),
                        "--set", "batch.size=64", "--set", "batch.drop_remainder=false",
                        "--echo-after", "decode_image", "2", "1000"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["source"] == json.loads(TRAIN.read_text())["source"]
    assert [s["op"] for s in doc["stages"]] == ["interleave", "repeat", "shuffle", "map", "echo", "shuffle",
                                                "map", "batch", "prefetch"]
    assert doc["stages"][7] == {"op": "batch", "size": 64, "drop_remainder": False}
    r = subprocess.run([sys.executable, "-m", "experiments.specs", "edit", str(TRAIN), str(out),
                        "--set", "batch=64"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "--set 'batch=64': expected OP.KEY=VALUE" in r.stderr


CELL = ROOT / "results/protocol/network-r2/cells/adaptive-m3-sb1000/seed-1/result.json"


@pytest.mark.skipif(not CELL.exists(), reason="no committed adaptive run")
def test_the_adaptive_buffer_configs(tmp_path):
    adaptive_buffer.write_configs(str(CELL), "http://127.0.0.1:1234", str(tmp_path))
    cell = json.loads(CELL.read_text())["config"]
    cell_stages = cell["train_spec"]["stages"]
    for name in ("adaptive_b8", "adaptive_b64", "adaptive_b512", "adaptive_default", "baseline"):
        c = json.loads((tmp_path / f"{name}.json").read_text())
        assert not c["eval_at_end"] and c["eval_every"] == 0 and c["eval_every_fresh"] == 0
        assert "target_accuracy" not in c
        assert c["train_spec"]["source"]["uri"] == "http://127.0.0.1:1234/train-{00000..00007}-of-00008.tfrecord"
        want = ([s for s in cell_stages if s["op"] != "echo"] if name == "baseline" else
                [dict(s, buffer=int(name[10:])) if s["op"] == "echo" and name != "adaptive_default" else s
                 for s in cell_stages])
        assert c["train_spec"]["stages"] == want
        assert {k: v for k, v in c.items() if k != "train_spec"} == \
            {**{k: v for k, v in cell.items() if k not in ("train_spec", "target_accuracy")},
             "eval_at_end": False, "eval_every": 0, "eval_every_fresh": 0}
