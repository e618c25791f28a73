"""The code blocks of README.md and docs/python.md, run as written, so that the docs and
the code cannot drift apart.

- ```python blocks run in order, one namespace per page, in a folder that has the data
  the page names (`shards/train-{00000..00007}-of-00008.tfrecord`: Fashion-MNIST for the
  README, RGB photos as JPEG for docs/python.md; for the README also `train/`, photos in
  ImageFolder's layout, and `shards/train-{00000..00015}.tar` made from it by `dataecho
  convert`). What a page leaves to the reader is
  given beforehand: `net` and `criterion` (a small model and its loss), `images` and
  `labels` (Fashion-MNIST's IDX files), `torch`. A block of `>>>` lines is a doctest:
  each expression's value must equal the output printed under it, where `...` stands
  for any value (the keys must be the same).
- ```json blocks that are pipeline specs run with `dataecho pipe --limit 1`; when the
  next block shows a line of its output, the fields' dtypes and shapes must be the same.
- A block that shows an error of `dataecho` (`dataecho: ...`) must be what the spec in
  the HTML comment `<!-- snippet-spec: {...} -->` just above it gives, word for word.
- ```sh blocks are the install, demo and test commands: CI and scripts/fresh_check.sh
  run them. The README's ```cpp block is built and run by tests/consumer/run.sh.
"""
import ast
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FASHION = Path("/usr/share/datasets/fashion-mnist")
PAGES = ["README.md", "docs/python.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def blocks(page):
    """(language, text, line, the text between the previous block and this one)."""
    text = (ROOT / page).read_text()
    out, last = [], 0
    for m in FENCE.finditer(text):
        out.append((m.group(1), m.group(2), text[:m.start()].count("\n") + 1, text[last:m.start()]))
        last = m.end()
    return out


def fashion_shards(out: Path, dataecho_bin: str) -> None:
    subprocess.run([dataecho_bin, "convert", "--images", str(FASHION / "train-images-idx3-ubyte.gz"),
                    "--labels", str(FASHION / "train-labels-idx1-ubyte.gz"), "--to", "tfrecord",
                    "--out", str(out), "--name", "train", "--shards", "8", "--limit", "1024"],
                   check=True, capture_output=True)


def photo_folder(folder: Path) -> None:
    """256 RGB JPEGs (smooth gradients with noise, 64-96 pixels wide) in 4 classes, in
    ImageFolder's layout."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(256):
        h, w = 48 + i % 17, 64 + i % 33
        y, x = np.mgrid[0:h, 0:w]
        img = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h)], axis=-1)
        img = np.clip(img + rng.normal(0, 20, img.shape), 0, 255).astype(np.uint8)
        d = folder / f"class{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / f"{i:04d}.jpg", quality=90)


def convert_folder(folder: Path, out: Path, to: str, shards: int, dataecho_bin: str) -> None:
    subprocess.run([dataecho_bin, "convert", "--dir", str(folder), "--to", to, "--out", str(out),
                    "--name", "train", "--shards", str(shards)], check=True, capture_output=True)


def prelude():
    import torch

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))  # Fashion-MNIST
    return {"torch": torch, "net": net, "criterion": torch.nn.CrossEntropyLoss(),
            "images": str(FASHION / "train-images-idx3-ubyte.gz"),
            "labels": str(FASHION / "train-labels-idx1-ubyte.gz")}


def same(expected, got, where):
    """`expected` (from the page, `...` for any value) against `got`."""
    if expected is Ellipsis:
        return
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{where}: the page shows a dict, the code gives {got!r}"
        assert set(expected) == set(got), (f"{where}: the page shows keys {sorted(expected)}, "
                                           f"the code gives {sorted(got)}")
        for k in expected:
            same(expected[k], got[k], f"{where}[{k!r}]")
    else:
        assert expected == got, f"{where}: the page shows {expected!r}, the code gives {got!r}"


def run_doctest(text, ns, where):
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        assert lines[i].startswith(">>> "), f"{where}: expected a '>>> ' line, got {lines[i]!r}"
        src = lines[i][4:]
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith(">>> "):
            shown.append(lines[i])
            i += 1
        if not shown:
            exec(compile(src, where, "exec"), ns)
            continue
        got = eval(compile(src, where, "eval"), ns)
        same(ast.literal_eval("\n".join(shown).strip()), got, f"{where}: {src}")


@pytest.fixture()
def page_dir(tmp_path, dataecho_bin, request):
    page = request.param
    work = tmp_path / "work"
    work.mkdir()
    if page == "README.md":  # Fashion-MNIST as TFRecord shards; photos as a folder and tar shards
        fashion_shards(work / "shards", dataecho_bin)
        photo_folder(work / "train")
        convert_folder(work / "train", work / "shards", "tar", 16, dataecho_bin)
    else:  # photos as TFRecord shards
        photo_folder(tmp_path / "photos")
        convert_folder(tmp_path / "photos", work / "shards", "tfrecord", 8, dataecho_bin)
    old = os.getcwd()
    os.chdir(work)
    yield page, work
    os.chdir(old)


@pytest.mark.parametrize("page_dir", PAGES, indirect=True)
def test_python_blocks_run_as_written(page_dir):
    page, _ = page_dir
    ns = prelude()
    ran = 0
    for lang, text, line, _ in blocks(page):
        if lang != "python":
            continue
        where = f"{page}:{line}"
        if text.lstrip().startswith(">>> "):
            run_doctest(text, ns, where)
        else:
            exec(compile(text, where, "exec"), ns)
        ran += 1
    assert ran >= 1, f"{page}: no python block"


def test_json_specs_and_the_output_shown(tmp_path, dataecho_bin):
    checked = 0
    bs = blocks("README.md")
    for n, (lang, text, line, _) in enumerate(bs):
        if lang != "json" or '"source"' not in text:
            continue
        spec = tmp_path / f"spec-{line}.json"
        spec.write_text(text)
        r = subprocess.run([dataecho_bin, "pipe", str(spec), "--limit", "1"], capture_output=True, text=True)
        assert r.returncode == 0, f"README.md:{line}: dataecho pipe failed: {r.stderr}"
        got = json.loads(r.stdout.splitlines()[0])
        if n + 1 < len(bs) and bs[n + 1][0] == "" and bs[n + 1][1].startswith('{"ids"'):
            shown = json.loads(bs[n + 1][1].replace(",...", ""))
            assert shown["fields"] == got["fields"], (f"README.md:{bs[n + 1][2]}: the page shows "
                                                      f"{shown['fields']}, dataecho pipe gives {got['fields']}")
            checked += 1
    assert checked == 1


def test_errors_shown_are_the_errors_given(tmp_path, dataecho_bin):
    checked = 0
    for page in PAGES:
        for lang, text, line, before in blocks(page):
            if lang != "" or not text.startswith("dataecho: "):
                continue
            m = re.search(r"<!-- snippet-spec: (.*?) -->\s*$", before, re.S)
            assert m, f"{page}:{line}: an error block without the <!-- snippet-spec: ... --> that gives it"
            spec = tmp_path / "spec.json"
            spec.write_text(m.group(1))
            r = subprocess.run([dataecho_bin, "pipe", str(spec)], capture_output=True, text=True)
            assert r.returncode != 0
            assert r.stderr.strip().splitlines()[0] == text.strip(), f"{page}:{line}: {r.stderr}"
            checked += 1
    assert checked >= 1
