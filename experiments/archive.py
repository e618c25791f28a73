"""Archives of run files: each experiment's finished runs, and each benchmark folder's raw
files, in one compressed, deterministic file beside the tables and plots made from them.

Format (a folder DIR of results/, e.g. results/protocol/sweep):

``DIR/runs.jsonl.xz``
    xz (one stream, LZMA2 at preset 9e with a 16 MiB dictionary and pb=0, CRC64 check,
    written by Python's ``lzma`` in one thread) of UTF-8 JSON lines, one record per folder
    of run files, sorted by that folder::

        {"dir":"cells/baseline/seed-1","files":{"evals.jsonl":"...","result.json":"...",
         "summary.json":"..."}}

    ``dir`` is the folder relative to DIR (``.`` for files directly in DIR); ``files`` maps
    each file's name to its text, verbatim, so that unpacking gives back the same bytes. A
    file that is not UTF-8 text goes under ``base64`` instead (name to the base64 of its
    bytes). For a training experiment a folder is one run (``cells/<cell>/[tune/lr-*/]
    seed-N``: its config and result, its summary, its evaluations); for a benchmark, one
    folder of its raw files (``runs``, or ``.`` for its logs).
``DIR/runs.sha256``
    the manifest, in ``sha256sum``'s format (``<sha256>  <path>``): first the archive
    itself, then every file in it by its path relative to DIR, sorted.

The same files give the same bytes: records and keys sorted, compact separators, no
times, owners or modes, fixed compression settings (the bytes of one liblzma: another
version may compress the same records otherwise, which reading does not mind). Reading
checks every file against the manifest, and the archive's own checksum; a corrupt,
truncated or altered archive is an :class:`ArchiveError` naming the archive and the
record. Standard tools read both files::

    xz -dc DIR/runs.jsonl.xz | jq -r 'select(.dir == "cells/baseline/seed-1") | .files["summary.json"]'
    (cd DIR && sha256sum -c --ignore-missing runs.sha256)

Commands (``python3 -m experiments.archive COMMAND``, from the repository's root):

``collect SRC DEST [--under cells] [--marker result.json] [--files NAME ...]``
    the finished runs under SRC/cells (the folders holding ``result.json``; their
    ``result.json``, ``summary.json`` and ``evals.jsonl``) join DEST's archive. A run
    already archived with the same bytes is kept; one that differs is an error.
``pack DIR [--under FOLDER | --from SRC [--as FOLDER]] [--keep PATH ...] [--remove]``
    DIR's raw files join its archive: every file under DIR/FOLDER (an experiment's run
    folders), or without ``--under`` a benchmark folder's raw files (:func:`is_raw`); with
    ``--from``, every file under SRC (a benchmark's runs in out/), as DIR/FOLDER (by
    default SRC's name). ``--keep`` leaves a file out (one a page cites by its path);
    ``--remove`` deletes the archived files once the archive holds them.
``unpack DIR [DEST] [--keep-existing]``
    the archived files written under DEST (by default DIR itself, where the report
    commands read them: the run folders are git-ignored), checked first. In DIR itself, a
    file under the archive's run folders that the archive lacks is an error (collect it).
``check DIR ...``, ``list DIR``, ``cat DIR PATH``
    verify; list the files; print one file.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import fnmatch
import hashlib
import json
import lzma
import os
import re
import sys
from pathlib import Path
from typing import Iterable, Mapping

ARCHIVE = "runs.jsonl.xz"
MANIFEST = "runs.sha256"
FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 24,
            "pb": 0}]
CHUNK = 1 << 12  # compressed bytes per step: a damaged stream is named near where it breaks
MANIFEST_LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")

# A benchmark folder's summary (what its README and the pages quote) stays as it is; the
# rest is raw (is_raw).
KEPT = ("README*", "*.md", "*.csv", "*.png", "*.svg", "*.sh", "*.c", "*.py")
SUMMARY_JSON = ("*compare*.json", "summary.json", "python_overhead.json", "autotune_rebuild.json")
RUN_FOLDERS = ("runs", "*_runs", "lr-*", "seed-*", "cells")
RAW_NAMES = ("*.json", "*.jsonl", "*.log", "*.load", "*.time", "*load_monitor.txt", "loads.txt",
             "output.txt", "perf_*.txt", "*SHA256SUMS")


class ArchiveError(Exception):
    """An archive or its manifest that cannot be read, or files that disagree with it."""


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def is_raw(path: str) -> bool:
    """Whether a benchmark folder's file (PATH relative to the folder) is raw: anything in
    a run folder (``runs/``, ``*_runs/``, ``lr-*/``, ``seed-*/``, ``cells/``), logs, load
    and time traces, and JSON other than the summary (``*compare*.json``, ``summary.json``,
    ``python_overhead.json``, ``autotune_rebuild.json``). READMEs, Markdown, CSV, plots
    and the scripts that ran the benchmark are never raw."""
    parts = path.split("/")
    if _matches(parts[-1], KEPT):
        return False
    if any(_matches(p, RUN_FOLDERS) for p in parts[:-1]):
        return True
    return not _matches(parts[-1], SUMMARY_JSON) and _matches(parts[-1], RAW_NAMES)


def sha256(data: bytes) -> str:
    """The hex SHA-256 of DATA."""
    return hashlib.sha256(data).hexdigest()


def _check_path(path: str) -> None:
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") for p in parts) or re.search(r"[\\\n\r]", path) \
            or path != path.strip():
        raise ArchiveError(f"{path!r}: not a plain relative path (no '.', '..', backslash, "
                           "line break or surrounding space)")


def encode(files: Mapping[str, bytes]) -> bytes:
    """The archive's bytes for FILES (path relative to the archive's folder -> bytes)."""
    folders: dict[str, dict[str, bytes]] = {}
    for path in files:
        _check_path(path)
        folder, _, name = path.rpartition("/")
        folders.setdefault(folder or ".", {})[name] = files[path]
    lines = []
    for folder in sorted(folders):
        texts: dict[str, str] = {}
        binary: dict[str, str] = {}
        for name, data in folders[folder].items():
            try:
                texts[name] = data.decode("utf-8")
            except UnicodeDecodeError:
                binary[name] = base64.b64encode(data).decode("ascii")
        record: dict[str, object] = {"dir": folder, "files": texts}
        if binary:
            record["base64"] = binary
        lines.append(json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    text = "".join(line + "\n" for line in lines)
    return lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                         filters=FILTERS)


def manifest_text(archive: bytes, files: Mapping[str, bytes]) -> str:
    """The manifest of ARCHIVE holding FILES, in sha256sum's format."""
    lines = [f"{sha256(archive)}  {ARCHIVE}"]
    lines += [f"{sha256(files[p])}  {p}" for p in sorted(files)]
    return "".join(line + "\n" for line in lines)


def read_manifest(folder: Path) -> tuple[str, dict[str, str]]:
    """The archive's checksum and each file's, from FOLDER's manifest."""
    path = folder / MANIFEST
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no manifest beside {folder / ARCHIVE}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ArchiveError(f"{path}: cannot be read: {e}") from None
    sums: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        m = MANIFEST_LINE.match(line)
        if not m:
            raise ArchiveError(f"{path}, line {n}: not '<sha256>  <path>': {line[:80]!r}")
        if (n == 1) != (m.group(2) == ARCHIVE):
            raise ArchiveError(f"{path}, line {n}: the first line, and only it, is the archive's "
                               f"checksum ({ARCHIVE})")
        if m.group(2) in sums:
            raise ArchiveError(f"{path}, line {n}: {m.group(2)} named twice")
        sums[m.group(2)] = m.group(1)
    if not sums:
        raise ArchiveError(f"{path}: empty (its first line is the archive's checksum)")
    return sums.pop(ARCHIVE), sums


def _record_files(where: str, line: bytes) -> tuple[str, dict[str, bytes]]:
    """A record's folder and files (path -> bytes); WHERE names it in errors."""
    try:
        record = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArchiveError(f"{where}: not a JSON object: {e}") from None
    if not isinstance(record, dict) or not isinstance(record.get("dir"), str) \
            or not isinstance(record.get("files"), dict) or set(record) - {"dir", "files", "base64"}:
        raise ArchiveError(f"{where}: not a record {{\"dir\": ..., \"files\": {{...}}[, \"base64\": {{...}}]}}")
    folder = record["dir"]
    prefix = "" if folder == "." else folder + "/"
    out: dict[str, bytes] = {}
    for key in ("files", "base64"):
        entries = record.get(key, {})
        if not isinstance(entries, dict):
            raise ArchiveError(f"{where} ({folder}): \"{key}\" is not an object")
        for name, value in entries.items():
            if not isinstance(value, str) or "/" in name or prefix + name in out:
                raise ArchiveError(f"{where} ({folder}): file {name!r} is not a name with one text")
            try:
                out[prefix + name] = (value.encode("utf-8") if key == "files"
                                      else base64.b64decode(value, validate=True))
            except (UnicodeEncodeError, binascii.Error) as e:
                raise ArchiveError(f"{where} ({folder}): file {name}: {e}") from None
    return folder, out


class _StreamError(Exception):
    """The xz stream breaks (corrupt or truncated data) after the records read so far."""


def _lines(data: bytes) -> Iterable[bytes]:
    """The archive's record lines, decompressed chunk by chunk, so that a damaged stream
    fails where it breaks (a _StreamError), after the records before it."""
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    pending = b""
    for start in range(0, len(data) or 1, CHUNK):
        if dec.eof:
            raise _StreamError("bytes after the end of the xz stream")
        try:
            pending += dec.decompress(data[start:start + CHUNK])
        except lzma.LZMAError as e:
            raise _StreamError(f"corrupt xz data ({e})") from None
        *lines, pending = pending.split(b"\n")
        yield from lines
    if not dec.eof:
        raise _StreamError("truncated: the xz stream ends early")
    if pending or dec.unused_data:
        raise _StreamError("bytes after the last record's line")


def read(folder: Path | str) -> dict[str, bytes]:
    """The files of FOLDER's archive (path relative to FOLDER -> bytes), each checked
    against the manifest, and the archive's own checksum."""
    folder = Path(folder)
    path = folder / ARCHIVE
    archive_sum, sums = read_manifest(folder)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ArchiveError(f"{path}: cannot be read: {e}") from None
    files: dict[str, bytes] = {}
    previous, n = "", 0
    try:
        for n, line in enumerate(_lines(data), 1):
            where = f"{path}, record {n}"
            name, record = _record_files(where, line)
            if name <= previous:
                raise ArchiveError(f"{where} ({name}): records out of order (after {previous})")
            previous = name
            _check_sums(f"{where} ({name})", record, sums, folder / MANIFEST)
            files.update(record)
    except _StreamError as e:
        raise ArchiveError(f"{path}: {e}, after record {n} ({previous or 'none'})") from None
    missing = sorted(set(sums) - set(files))
    if missing:
        raise ArchiveError(f"{path}: the manifest names {len(missing)} file(s) no record holds: "
                           + ", ".join(missing[:5]))
    if sha256(data) != archive_sum:
        raise ArchiveError(f"{path}: its sha256 differs from the manifest {folder / MANIFEST} "
                           "(the archive changed after its manifest was written)")
    return files


def _check_sums(where: str, record: Mapping[str, bytes], sums: Mapping[str, str],
                manifest: Path) -> None:
    for name, content in sorted(record.items()):
        if name not in sums:
            raise ArchiveError(f"{where}: {name} is not in the manifest {manifest}")
        if sha256(content) != sums[name]:
            raise ArchiveError(f"{where}: {name} differs from the manifest {manifest} (sha256 "
                               f"{sha256(content)[:12]}..., the manifest's {sums[name][:12]}...)")


def write(folder: Path | str, files: Mapping[str, bytes]) -> bool:
    """FOLDER's archive and manifest holding exactly FILES; False when they already did
    (the files are then left untouched)."""
    folder = Path(folder)
    archive = encode(files)
    manifest = manifest_text(archive, files)
    paths = [folder / ARCHIVE, folder / MANIFEST]
    if all(p.exists() for p in paths) and paths[0].read_bytes() == archive \
            and paths[1].read_text(encoding="utf-8") == manifest:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    for p, content in zip(paths, (archive, manifest.encode("utf-8"))):
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(content)
        os.replace(tmp, p)
    return True


def merge(folder: Path | str, new: Mapping[str, bytes]) -> tuple[int, int]:
    """NEW files join FOLDER's archive (made when there is none): a file archived with the
    same bytes is kept, one with other bytes is an ArchiveError listing them. Returns how
    many files were added and how many were there already."""
    folder = Path(folder)
    old = read(folder) if (folder / ARCHIVE).exists() or (folder / MANIFEST).exists() else {}
    differing = sorted(p for p in new if p in old and old[p] != new[p])
    if differing:
        raise ArchiveError(f"{folder / ARCHIVE}: {len(differing)} file(s) differ from the archived "
                           f"ones (a run is archived once; give a new run a new seed or folder): "
                           + ", ".join(differing[:5]))
    added = {p: d for p, d in new.items() if p not in old}
    if added:
        write(folder, {**old, **added})
    return len(added), len(new) - len(added)


def run_files(src: Path, under: str, marker: str, names: Iterable[str]) -> dict[str, bytes]:
    """The finished runs under SRC/UNDER: of each folder holding MARKER, the files NAMES
    that exist (path relative to SRC -> bytes)."""
    out: dict[str, bytes] = {}
    for done in sorted((src / under).rglob(marker)):
        for name in names:
            f = done.parent / name
            if f.is_file():
                out[f.relative_to(src).as_posix()] = f.read_bytes()
    return out


def raw_files(folder: Path, under: str | None) -> dict[str, bytes]:
    """FOLDER's raw files (path relative to FOLDER -> bytes): every file under
    FOLDER/UNDER, or by is_raw without UNDER; never the archive or its manifest."""
    base = folder / under if under else folder
    out: dict[str, bytes] = {}
    for f in sorted(base.rglob("*")):
        rel = f.relative_to(folder).as_posix()
        if f.is_file() and rel not in (ARCHIVE, MANIFEST) and (under or is_raw(rel)):
            out[rel] = f.read_bytes()
    return out


def unpack(folder: Path | str, dest: Path | str | None = None, keep_existing: bool = False) -> int:
    """FOLDER's archived files written under DEST (by default FOLDER), checked first;
    returns how many were written. KEEP_EXISTING: a file already in DEST stays as it is.
    Unpacking in place, a file under the archive's run folders that the archive lacks is
    an ArchiveError (the report would read a run the archive does not hold)."""
    folder = Path(folder)
    files = read(folder)
    target = Path(dest) if dest is not None else folder
    if dest is None:
        tops = {p.split("/")[0] for p in files if "/" in p}
        extra = sorted(f.relative_to(folder).as_posix() for top in tops
                       for f in (folder / top).rglob("*")
                       if f.is_file() and f.relative_to(folder).as_posix() not in files
                       and not f.name.endswith(".tmp"))  # another unpack's file in flight
        if extra:
            raise ArchiveError(f"{folder / ARCHIVE} lacks {len(extra)} file(s) under its run "
                               f"folders: {', '.join(extra[:5])}: archive them (collect) or remove them")
    written = 0
    for rel, data in sorted(files.items()):
        f = target / rel
        if f.exists() and (keep_existing or f.read_bytes() == data):
            continue
        f.parent.mkdir(parents=True, exist_ok=True)
        # Whole files only: a reader beside a second unpack never sees one half written.
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, f)
        written += 1
    return written


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python3 -m experiments.archive",
                                 description="Archives of run files (results/): "
                                 "see this module's docstring for the format.")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="finished runs under SRC join DEST's archive")
    c.add_argument("src", type=Path)
    c.add_argument("dest", type=Path)
    c.add_argument("--under", default="cells")
    c.add_argument("--marker", default="result.json")
    c.add_argument("--files", nargs="+", default=["result.json", "summary.json", "evals.jsonl"])
    p = sub.add_parser("pack", help="DIR's raw files join its archive")
    p.add_argument("dir", type=Path)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--under", help="every file under DIR/UNDER (an experiment's run folders)")
    what.add_argument("--from", dest="src", type=Path,
                      help="every file under SRC (a benchmark's run folder in out/), archived as DIR/AS")
    p.add_argument("--as", dest="as_", help="the folder SRC's files take in DIR (default SRC's name)")
    p.add_argument("--keep", action="append", default=[], metavar="PATH",
                   help="a file (path relative to DIR, glob) left out of the archive; repeatable")
    p.add_argument("--remove", action="store_true", help="delete the archived files")
    u = sub.add_parser("unpack", help="the archived files written under DEST (default DIR)")
    u.add_argument("dir", type=Path)
    u.add_argument("dest", type=Path, nargs="?")
    u.add_argument("--keep-existing", action="store_true")
    k = sub.add_parser("check", help="verify archives against their manifests")
    k.add_argument("dirs", type=Path, nargs="+")
    ls = sub.add_parser("list", help="the archived files")
    ls.add_argument("dir", type=Path)
    cat = sub.add_parser("cat", help="print one archived file")
    cat.add_argument("dir", type=Path)
    cat.add_argument("path")
    return ap


def _pack(a: argparse.Namespace) -> None:
    folder: Path = a.dir
    if a.src is None:
        base, files = folder, raw_files(folder, a.under)
        files = {rel: data for rel, data in files.items() if not _matches(rel, a.keep)}
    else:
        base, name = a.src, a.as_ or a.src.resolve().name
        files = {f"{name}/{rel}": data for rel, data in raw_files(a.src, ".").items()}
    if not files:
        raise ArchiveError(f"{a.src or folder}: no raw files to archive")
    added, _ = merge(folder, files)
    held = read(folder)
    if any(held.get(rel) != data for rel, data in files.items()):
        raise ArchiveError(f"{folder / ARCHIVE}: does not read back what was packed")
    if a.remove:
        _remove(base, {rel.split("/", 1)[1] if a.src else rel: data for rel, data in files.items()})
    print(f"{folder / ARCHIVE}: {len(files)} files from {base} ({added} new)"
          + (f", removed from {base}" if a.remove else ""))


def _remove(base: Path, files: Mapping[str, bytes]) -> None:
    """Deletes FILES (relative to BASE) that still hold the archived bytes, and the
    folders left empty."""
    for rel, data in files.items():
        if (base / rel).read_bytes() == data:
            (base / rel).unlink()
    for d in sorted({(base / rel).parent for rel in files}, key=lambda p: -len(p.parts)):
        while d != base and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
            d = d.parent


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    a = _parser().parse_args(argv)
    try:
        if a.command == "collect":
            added, kept = merge(a.dest, run_files(a.src, a.under, a.marker, a.files))
            runs = sum(1 for p in read(a.dest) if p.endswith("/" + a.marker))
            print(f"{a.dest}: {runs} runs in {a.dest / ARCHIVE} ({added} new files, {kept} archived already)")
        elif a.command == "pack":
            _pack(a)
        elif a.command == "unpack":
            n = unpack(a.dir, a.dest, a.keep_existing)
            if n:
                print(f"{a.dir / ARCHIVE}: {n} files written under {a.dest or a.dir}", file=sys.stderr)
        elif a.command == "check":
            for d in a.dirs:
                print(f"{d / ARCHIVE}: {len(read(d))} files agree with {d / MANIFEST}")
        elif a.command == "list":
            print("\n".join(sorted(read(a.dir))))
        else:
            files = read(a.dir)
            if a.path not in files:
                raise ArchiveError(f"{a.dir / ARCHIVE}: no file {a.path}")
            sys.stdout.buffer.write(files[a.path])
    except ArchiveError as e:
        print(f"archive: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
