"""The archives of run files under results/ (experiments/archive.py): the same files give
the same bytes, unpacking gives the files back, a damaged archive or one that disagrees
with its manifest is refused naming the archive and the record, collect keeps archived
runs and refuses a changed one, and a committed experiment's tables recompute byte for
byte from its archive alone (results/distributed, through its report command)."""

import filecmp
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from experiments import archive  # noqa: E402

RUN = {
    "cells/baseline/seed-1/result.json": b'{"cell": "baseline",\n "seed": 1}\n',
    "cells/baseline/seed-1/summary.json": b'{"fresh": 499200}\n',
    "cells/baseline/seed-1/evals.jsonl": b'{"step":20,"accuracy":0.6}\n{"step":40,"accuracy":0.7}\n',
    "cells/before_aug-e4-sb1000/tune/lr-0.05/seed-101/result.json": "{\"note\": \"\u00e9cho \\\"4\\\"\"}".encode(),
    "cells/before_aug-e4-sb1000/seed-2/summary.json": b"no newline at the end",
    "runs/photo/r1.time": b"\x00\x01\xff binary, not UTF-8\r\n",
    "load.log": b"",
}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_the_same_files_give_the_same_archive_whatever_their_order_and_times(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_tree(a, RUN)
    write_tree(b, dict(reversed(list(RUN.items()))))
    os.utime(b / "load.log", (1, 1))
    assert archive.write(a, archive.raw_files(a, None)) and archive.write(b, archive.raw_files(b, None))
    assert (a / archive.ARCHIVE).read_bytes() == (b / archive.ARCHIVE).read_bytes()
    assert (a / archive.MANIFEST).read_bytes() == (b / archive.MANIFEST).read_bytes()
    # Writing again what the archive holds leaves it alone.
    assert not archive.write(a, archive.read(a))
    # One byte more in one file changes the archive.
    changed = dict(RUN, **{"load.log": b"x"})
    assert archive.encode(changed) != archive.encode(RUN)


def test_unpacking_gives_back_every_file_byte_for_byte(tmp_path):
    archive.write(tmp_path / "arch", RUN)
    assert archive.read(tmp_path / "arch") == RUN
    assert archive.unpack(tmp_path / "arch", tmp_path / "out") == len(RUN)
    for rel, data in RUN.items():
        assert (tmp_path / "out" / rel).read_bytes() == data
    # A record per folder, readable with standard tools: xz, then one JSON object a line.
    lines = lzma.decompress((tmp_path / "arch" / archive.ARCHIVE).read_bytes()).decode().splitlines()
    assert [line[:40] for line in lines][0].startswith('{"dir":".","files":{"load.log":""}')
    assert any('"base64":{"r1.time":' in line for line in lines)
    # The manifest is sha256sum's format: it checks the files where they are unpacked.
    shutil.copy(tmp_path / "arch" / archive.MANIFEST, tmp_path / "out")
    subprocess.run(["sha256sum", "--quiet", "-c", "--ignore-missing", archive.MANIFEST],
                   cwd=tmp_path / "out", check=True)


def damaged(tmp_path: Path, change) -> str:
    """The error reading an archive of RUN after CHANGE(folder)."""
    folder = tmp_path / "arch"
    shutil.rmtree(folder, ignore_errors=True)
    archive.write(folder, RUN)
    change(folder)
    with pytest.raises(archive.ArchiveError) as e:
        archive.read(folder)
    return str(e.value)


def test_a_damaged_archive_or_manifest_is_refused_naming_the_archive_and_the_record(tmp_path):
    arch = tmp_path / "arch" / archive.ARCHIVE
    man = tmp_path / "arch" / archive.MANIFEST
    msg = damaged(tmp_path, lambda d: arch.write_bytes(arch.read_bytes()[:-30]))
    assert str(arch) in msg and "truncated" in msg and "after record" in msg
    msg = damaged(tmp_path, lambda d: arch.write_bytes(b"not xz at all"))
    assert str(arch) in msg and "corrupt xz data" in msg
    # A file whose bytes differ from the manifest's checksum: the record is named.
    other = dict(RUN, **{"cells/baseline/seed-1/summary.json": b'{"fresh": 1}\n'})
    msg = damaged(tmp_path, lambda d: arch.write_bytes(archive.encode(other)))
    assert f"{arch}, record" in msg and "(cells/baseline/seed-1)" in msg
    assert "summary.json differs from the manifest" in msg
    # The same files recompressed otherwise: the archive's own checksum.
    msg = damaged(tmp_path, lambda d: arch.write_bytes(lzma.compress(lzma.decompress(arch.read_bytes()))))
    assert "its sha256 differs from the manifest" in msg
    # A file the manifest lacks, or one it names that no record holds.
    msg = damaged(tmp_path, lambda d: man.write_text("".join(man.read_text().splitlines(True)[:-1])))
    assert "is not in the manifest" in msg and str(arch) in msg
    msg = damaged(tmp_path, lambda d: man.write_text(man.read_text() + "0" * 64 + "  cells/x/seed-9/result.json\n"))
    assert "names 1 file(s) no record holds: cells/x/seed-9/result.json" in msg
    msg = damaged(tmp_path, lambda d: man.unlink())
    assert f"{man}: no manifest beside {arch}" in msg
    msg = damaged(tmp_path, lambda d: man.write_text("garbage\n"))
    assert f"{man}, line 1" in msg


def test_collect_keeps_archived_runs_adds_new_ones_and_refuses_a_changed_one(tmp_path):
    src, dest = tmp_path / "out" / "sweep", tmp_path / "results" / "sweep"
    write_tree(src, {k: v for k, v in RUN.items() if k.startswith("cells/baseline/")})
    (src / "cells" / "unfinished" / "seed-1").mkdir(parents=True)
    (src / "cells" / "unfinished" / "seed-1" / "evals.jsonl").write_text("{}\n")
    assert archive.main(["collect", str(src), str(dest)]) == 0
    assert sorted(archive.read(dest)) == sorted(k for k in RUN if k.startswith("cells/baseline/"))
    before = (dest / archive.ARCHIVE).read_bytes()
    assert archive.main(["collect", str(src), str(dest)]) == 0  # nothing new: unchanged
    assert (dest / archive.ARCHIVE).read_bytes() == before
    write_tree(src, {"cells/e2/seed-1/result.json": b"{}\n"})
    assert archive.merge(dest, archive.run_files(src, "cells", "result.json", ["result.json"])) == (1, 1)
    (src / "cells" / "baseline" / "seed-1" / "summary.json").write_bytes(b'{"fresh": 2}\n')
    with pytest.raises(archive.ArchiveError, match="1 file.s. differ from the archived ones.*"
                       "cells/baseline/seed-1/summary.json"):
        archive.merge(dest, archive.run_files(src, "cells", "result.json", ["summary.json"]))


def test_unpacking_in_place_refuses_a_run_the_archive_lacks(tmp_path):
    archive.write(tmp_path, {k: v for k, v in RUN.items() if k.startswith("cells/")})
    assert archive.unpack(tmp_path) == 5 and archive.unpack(tmp_path) == 0
    write_tree(tmp_path, {"cells/stray/seed-1/result.json": b"{}"})
    with pytest.raises(archive.ArchiveError, match="lacks 1 file.*cells/stray/seed-1/result.json"):
        archive.unpack(tmp_path)


def test_a_benchmark_folder_keeps_its_summary_and_archives_its_raw_files():
    raw = ["runs/r1_photo_dataecho_t0.json", "runs/photo_t0.spec.json", "run.log", "a_round1.load",
           "a_round1.json", "load_monitor.txt", "lr-0.01/summary.json", "photo_SHA256SUMS"]
    kept = ["README.txt", "summary.md", "dataloader_compare.json", "summary.json", "results.csv",
            "python_overhead.json", "plots/x.svg", "ab.sh", "runs/README.md", "layout_ab.txt"]
    assert [p for p in raw if not archive.is_raw(p)] == []
    assert [p for p in kept if archive.is_raw(p)] == []


def test_the_distributed_tables_recompute_byte_for_byte_from_their_archive(tmp_path):
    committed = ROOT / "results" / "distributed"
    if not (committed / archive.ARCHIVE).exists():
        pytest.skip("results/distributed has no archive")
    copy = tmp_path / "distributed"
    copy.mkdir()
    for name in (archive.ARCHIVE, archive.MANIFEST):
        shutil.copy(committed / name, copy)
    # The report command of the experiment, on the archive alone (no run files beside it).
    subprocess.run([str(ROOT / "experiments" / "distributed" / "run.sh"), "report"], check=True,
                   env=dict(os.environ, RESULTS=str(copy)), cwd=ROOT, stdout=subprocess.DEVNULL)
    for table in ("summary.md", "runs.csv"):
        assert filecmp.cmp(copy / table, committed / table, shallow=False), table
