"""scripts/gcide_split.py on a small dictd database the test writes itself, so that it
runs without dict-gcide: the split is by headword and deterministic, the database's own
entries are left out, a Windows-1252 entry is recoded, and --shards writes TFRecord
shards that read back, through `import dataecho`, as the JSON Lines entries in the same
order. Bad inputs stop it with a message naming the file."""

import gzip
import hashlib
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

import pytest

import dataecho as de
from conftest import ROOT

SCRIPT = str(ROOT / "scripts" / "gcide_split.py")
_spec = importlib.util.spec_from_file_location("gcide_split", SCRIPT)
assert _spec and _spec.loader
gcide_split = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gcide_split)


def b64(n: int) -> str:
    """n in dictd's base64, as the script's b64_number reads it."""
    s = ""
    while True:
        s = gcide_split.B64[n % 64] + s
        n //= 64
        if n == 0:
            return s


def write_database(d: Path) -> int:
    """A dictd .index and gzip .dict: 120 words, every tenth with a second entry (a verb)
    under the same headword, one entry that two headwords share, one in Windows-1252 and
    the database's own description. Returns the entries the splits should hold in all."""
    entries: List[Tuple[List[str], bytes]] = [(["00-database-info"], b"A test database.\n")]
    for i in range(120):
        word = f"Word{i:03d}"
        entries.append(([word], f"{word} \\word{i:03d}\\, n. The thing numbered {i}.\n\n".encode()))
        if i % 10 == 0:
            entries.append(([word], f"{word} \\word{i:03d}\\, v. To number {i}.\n\n".encode()))
    entries.append((["Colour", "Color"], b"Colour \\colour\\, n. Hue.\n\n"))
    entries.append((["Caf's"], b"Caf\x92s \\cafs\\, n. Places\x92 names.\n\n"))
    data, index = b"", []
    for names, text in entries:
        for name in names:
            index.append(f"{name}\t{b64(len(data))}\t{b64(len(text))}\n")
        data += text
    (d / "test.index").write_text("".join(sorted(index)))
    with gzip.open(d / "test.dict.dz", "wb") as f:
        f.write(data)
    return len(entries) - 1


def split(d: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, "--dict", str(d / "test.dict.dz"), "--index",
                           str(d / "test.index"), "--out", str(out), *args],
                          capture_output=True, text=True)


def read_jsonl(path: Path) -> List[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


headword = gcide_split.headword


@dataclass
class Made:
    dir: Path  # the database
    a: Path  # one split of it
    b: Path  # a second, from the same input
    count: int  # the entries the splits hold in all


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, dataecho_bin: str) -> Made:
    d = tmp_path_factory.mktemp("gcide")
    count = write_database(d)
    for out in ("a", "b"):
        r = split(d, d / out, "--valid", "15", "--test", "15", "--shards", "2",
                  "--dataecho", dataecho_bin)
        assert r.returncode == 0, r.stderr
    return Made(d, d / "a", d / "b", count)


def test_the_same_input_gives_the_same_bytes(made: Made) -> None:
    a, b = made.a, made.b
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len([f for f in files if f.suffix == ".tfrecord"]) == 6
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_every_entry_lands_in_one_split_with_all_of_its_headword(made: Made) -> None:
    a = made.a
    splits = {name: read_jsonl(a / f"{name}.jsonl.gz") for name in ("train", "valid", "test")}
    texts = [t for s in splits.values() for t in s]
    assert len(texts) == made.count and len(set(texts)) == len(texts)
    assert not any("test database" in t for t in texts), "the database's own entry is left out"
    where = {}
    for name, rows in splits.items():
        assert rows, f"{name} is empty"
        keys = [hashlib.sha256(headword(t).encode()).digest() for t in rows]
        assert keys == sorted(keys), f"{name} is not in hash order"
        for t in rows:
            assert where.setdefault(headword(t), name) == name, f"{headword(t)} is in two splits"
    assert "Caf\u2019s \\cafs\\, n. Places\u2019 names." in texts  # Windows-1252 0x92, recoded
    summary = json.loads((a / "split.json").read_text())
    assert summary["read_as_windows_1252"] == ["Caf's"]
    for name, rows in splits.items():
        info = summary["splits"][name]
        assert info["entries"] == len(rows)
        assert info["byte_tokens"] == sum(len(t.encode()) + 1 for t in rows)
        assert info["shards"] == [f"shards/{name}-0000{i}-of-00002.tfrecord" for i in range(2)]


def test_shards_read_back_as_the_entries_in_order(made: Made) -> None:
    a = made.a
    for name in ("train", "valid", "test"):
        shards = [str(a / f) for f in json.loads((a / "split.json").read_text())["splits"][name]["shards"]]
        got = [bytes(x["text"]).decode() for x in
               de.tfrecord(shards, features={"text": "text"}).build(as_numpy=True)]
        assert got == read_jsonl(a / f"{name}.jsonl.gz"), name


def test_bad_inputs_stop_it_with_a_message_naming_the_file(made: Made, tmp_path: Path) -> None:
    d = made.dir
    r = subprocess.run([sys.executable, SCRIPT, "--dict", str(tmp_path / "none.dict.dz"), "--index",
                        str(d / "test.index"), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode != 0 and "none.dict.dz: not found" in r.stderr
    r = split(d, tmp_path / "o", "--shards", "2", "--dataecho", str(tmp_path / "no-tool"))
    assert r.returncode != 0 and "no-tool is not an executable" in r.stderr
    assert not (tmp_path / "o").exists(), "refused before writing anything"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "test.dict.dz").write_bytes((d / "test.dict.dz").read_bytes())
    (bad / "test.index").write_text((d / "test.index").read_text() + "Oops\tA\n")
    r = split(bad, tmp_path / "o")
    assert r.returncode != 0 and "test.index line 137: expected 3 tab-separated fields" in r.stderr
