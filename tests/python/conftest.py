"""Fixtures of the Python package's tests: real shards made by `dataecho convert` from
Debian's Fashion-MNIST, the `dataecho` tool, and a real nginx (`dataecho serve`)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
FASHION = Path("/usr/share/datasets/fashion-mnist")
IMAGES = str(FASHION / "train-images-idx3-ubyte.gz")
LABELS = str(FASHION / "train-labels-idx1-ubyte.gz")


@pytest.fixture(scope="session")
def dataecho_bin() -> str:
    b = os.environ.get("DATAECHO_BIN", str(ROOT / "build" / "bin" / "dataecho"))
    assert os.access(b, os.X_OK), f"no dataecho tool at {b} (set DATAECHO_BIN)"
    return b


@pytest.fixture(scope="session")
def shards(tmp_path_factory, dataecho_bin) -> Path:
    """600 Fashion-MNIST images as PNG in 4 TFRecord and 4 tar shards."""
    out = tmp_path_factory.mktemp("shards")
    for fmt in ("tfrecord", "tar"):
        subprocess.run(
            [dataecho_bin, "convert", "--images", IMAGES, "--labels", LABELS, "--to", fmt,
             "--out", str(out / fmt), "--name", "train", "--shards", "4", "--limit", "600"],
            check=True, capture_output=True)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script: Path, world_size: int) -> List[int]:
    """Runs `script` as ranks 0..world_size-1 of a torch.distributed job on loopback, at
    once, and returns their exit codes. Started with torchrun's environment by hand:
    Debian's torch 1.13 torchrun fails on Python 3.11 before it starts a rank (its
    redirects default)."""
    port = str(_free_port())
    ranks = [subprocess.Popen([sys.executable, str(script)],
                              env=dict(os.environ, OMP_NUM_THREADS="1", RANK=str(r), WORLD_SIZE=str(world_size),
                                       LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
             for r in range(world_size)]
    return [p.wait(timeout=300) for p in ranks]


@pytest.fixture(scope="session")
def http_root(shards, dataecho_bin):
    """The shards folder served by nginx on a free loopback port: its base URL."""
    for _ in range(5):
        port = _free_port()
        proc = subprocess.Popen([dataecho_bin, "serve", str(shards), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            yield f"http://127.0.0.1:{port}"
            proc.terminate()
            proc.wait(10)
            return
    pytest.fail("dataecho serve did not start")
