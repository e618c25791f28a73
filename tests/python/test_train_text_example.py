"""examples/python/train_text.py on a tiny corpus the test writes itself (no dict-gcide):
the run stops at --max-steps, its validation loss is finite and falls, and it counts
every block fresh without echo and about half of them with --echo 2."""

import gzip
import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any, Dict

import pytest

from conftest import ROOT

WORDS = ["apple", "brook", "cinder", "dune", "ember", "fable", "grove", "harbor"]


def write_split(path: Path, entries: int, offset: int) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(entries):
            w = WORDS[(i + offset) % len(WORDS)]
            text = f"{w.capitalize()} \\{w}\\, n. A {w} is a {w}; see {WORDS[(i + 3) % len(WORDS)]}."
            f.write(json.dumps({"text": text}) + "\n")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    write_split(d / "train.jsonl.gz", 400, 0)
    write_split(d / "valid.jsonl.gz", 40, 1)
    return d


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_text", ROOT / "examples/python/train_text.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(example: ModuleType, corpus: Path, tmp_path: Path, echo: int) -> Dict[str, Any]:
    out = tmp_path / f"echo{echo}.json"
    summary = example.main([
        "--data", str(corpus), "--echo", str(echo), "--depth", "1", "--width", "32", "--heads", "2",
        "--context", "32", "--batch", "8", "--shuffle-blocks", "32", "--lr", "1e-2", "--warmup-steps", "5",
        "--max-steps", "60", "--eval-every", "20", "--eval-blocks", "32", "--log-every", "5",
        "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(summary))
    return summary


@pytest.mark.parametrize("echo", [1, 2])
def test_trains_and_counts_fresh_blocks(example: ModuleType, corpus: Path, tmp_path: Path, echo: int) -> None:
    s = run(example, corpus, tmp_path, echo)
    assert s["steps"] == 60 and s["examples"] == 480
    assert [e["step"] for e in s["evals"]] == [20, 40, 60]
    losses = [e["loss"] for e in s["evals"]]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.5, losses  # a repetitive corpus: well below where it started
    assert losses[-1] < math.log(257)
    assert s["train_losses"][-1]["train_loss"] < s["train_losses"][0]["train_loss"]
    assert s["fresh_examples"] + s["echoed_examples"] == 480
    if echo == 1:
        assert s["fresh_examples"] == 480 and s["echo_stage_counters"] is None
    else:  # each block twice in all: about half of what the model saw was fresh
        assert 0.4 * 480 <= s["fresh_examples"] <= 0.65 * 480, s["fresh_examples"]
        assert s["echo_stage_counters"]["fresh"] >= s["fresh_examples"]
