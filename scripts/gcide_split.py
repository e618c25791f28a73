#!/usr/bin/env python3
"""Splits Debian's dict-gcide (the GNU Collaborative International Dictionary of English)
into train, validation and test sets by dictionary entry, deterministically.

  scripts/gcide_split.py --out data/gcide            (apt-get install dict-gcide first)
  scripts/gcide_split.py --out data/gcide --shards 8 (and each split as 8 TFRecord shards)

Reads the dictd index (/usr/share/dictd/gcide.index: headword, offset, length in dictd's
base64) and the data file (gcide.dict.dz: dictzip, which is gzip), and writes
  OUT/train.jsonl.gz, OUT/valid.jsonl.gz, OUT/test.jsonl.gz: one entry per line, as
      {"text": "<the entry's text>"} (UTF-8 kept as is; trailing blank lines dropped),
      read with the text source's "format": "jsonl" (docs/train.md, "The language model");
  OUT/split.json: entries and bytes per split, the rule, and the input files' SHA-256;
  with --shards N, OUT/shards/<split>-0000i-of-0000N.tfrecord too: each split converted by
      `dataecho convert --text OUT/<split>.jsonl.gz --jsonl --to tfrecord` (docs/text.md),
      records in the same order, one bytes feature `text`; split.json lists them.

An entry is a distinct (offset, length) range of the index (several headwords may point to
one entry); the 00-database-* entries (the database's own description) are left out. Its
split is chosen by the SHA-256 of its headword (the text before the pronunciation
"\\...\\" on its first line, lower-cased), so every entry of one word (noun, verb...) goes
to the same split: its first 8 bytes as a big-endian integer, modulo 100, below
100 - valid - test is train, then valid, then test. Within a split the entries are
ordered by that hash, not alphabetically, so that any prefix of a split (the first N
blocks of an evaluation spec) is a uniform sample of it. The few entries that are not
valid UTF-8 (Windows-1252 punctuation) are read as Windows-1252 and written as UTF-8;
split.json names them. The output gzip files carry no time stamp: the same input gives
the same bytes.
"""
import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_number(s, where):
    value = 0
    for ch in s:
        digit = B64.find(ch)
        if digit < 0:
            sys.exit(f"gcide_split: {where}: {s!r} is not a dictd base64 number")
        value = value * 64 + digit
    return value


def read_index(path):
    """{(offset, length): [headwords]} from a dictd .index file."""
    entries = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                sys.exit(f"gcide_split: {path} line {number}: expected 3 tab-separated fields")
            where = f"{path} line {number}"
            key = (b64_number(parts[1], where), b64_number(parts[2], where))
            entries.setdefault(key, []).append(parts[0])
    return entries


def headword(text):
    first = text.split("\n", 1)[0]
    return first.split(" \\", 1)[0].strip().lower()


def bucket(word):
    return int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "big") % 100


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split_entries(data, index, valid, test, dict_path, recoded):
    splits = {"train": [], "valid": [], "test": []}
    for (offset, length), names in sorted(index.items()):
        if all(n.startswith("00-database") for n in names):
            continue
        if offset + length > len(data):
            sys.exit(f"gcide_split: {dict_path}: entry {names[0]!r} at byte {offset} (+{length}) "
                     f"is past the end of the data ({len(data)} bytes)")
        raw = data[offset:offset + length]
        try:
            text = raw.decode("utf-8").rstrip()
        except UnicodeDecodeError:
            # A few entries hold Windows-1252 punctuation (0x92 for a quote): read as such.
            text = raw.decode("cp1252", errors="replace").rstrip()
            recoded.append(names[0])
        if not text:
            continue
        word = headword(text)
        b = bucket(word)
        name = "train" if b < 100 - valid - test else ("valid" if b < 100 - test else "test")
        splits[name].append((hashlib.sha256(word.encode("utf-8")).digest(), offset, text))
    return splits


def write_split(path, rows):
    rows.sort()
    size = 0
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            for _, _, text in rows:
                line = json.dumps({"text": text}, ensure_ascii=False) + "\n"
                f.write(line.encode("utf-8"))
                size += len(text.encode("utf-8")) + 1  # + the end-of-sequence token
    return size


def convert_to_shards(tool, jsonl, shards, out, name):
    """Writes `jsonl` as `shards` TFRecord shards with the dataecho tool: their paths."""
    cmd = [tool, "convert", "--text", jsonl, "--jsonl", "--to", "tfrecord", "--shards", str(shards),
           "--out", out, "--name", name]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"gcide_split: {' '.join(cmd)} failed: {r.stderr.strip() or r.stdout.strip()}")
    files = [os.path.join(out, f"{name}-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        sys.exit(f"gcide_split: {' '.join(cmd)} did not write {missing[0]}")
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dict", default="/usr/share/dictd/gcide.dict.dz")
    ap.add_argument("--index", default="/usr/share/dictd/gcide.index")
    ap.add_argument("--out", required=True)
    ap.add_argument("--valid", type=int, default=5, help="percent of headwords (default 5)")
    ap.add_argument("--test", type=int, default=5, help="percent of headwords (default 5)")
    ap.add_argument("--shards", type=int, default=0,
                    help="also write each split as this many TFRecord shards under OUT/shards")
    ap.add_argument("--dataecho", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bin", "dataecho"),
                    help="the dataecho tool that converts to shards (default build/bin/dataecho)")
    a = ap.parse_args()
    if a.valid < 0 or a.test < 0 or a.valid + a.test >= 100:
        sys.exit("gcide_split: --valid and --test must be >= 0 and sum below 100")
    if a.shards < 0:
        sys.exit(f"gcide_split: --shards {a.shards}: must be >= 0")
    if a.shards and not os.access(a.dataecho, os.X_OK):
        sys.exit(f"gcide_split: --shards needs the dataecho tool, and {a.dataecho} is not an "
                 "executable (build it, or name it with --dataecho)")
    for p in (a.dict, a.index):
        if not os.path.exists(p):
            sys.exit(f"gcide_split: {p}: not found (apt-get install dict-gcide)")
    with gzip.open(a.dict, "rb") as f:
        data = f.read()
    recoded = []  # entries that are not UTF-8, read as Windows-1252
    splits = split_entries(data, read_index(a.index), a.valid, a.test, a.dict, recoded)
    os.makedirs(a.out, exist_ok=True)
    summary = {"rule": f"sha256(lower-cased headword)[:8] mod 100: < {100 - a.valid - a.test} "
                       f"train, < {100 - a.test} valid, else test; ordered by that hash",
               "inputs": {p: sha256_file(p) for p in (a.dict, a.index)},
               "read_as_windows_1252": recoded, "splits": {}}
    for name, rows in splits.items():
        count = len(rows)
        path = os.path.join(a.out, name + ".jsonl.gz")
        tokens = write_split(path, rows)
        summary["splits"][name] = {"entries": count, "byte_tokens": tokens}
        print(f"gcide_split: {name}: {count} entries, {tokens} byte tokens")
        if a.shards:
            files = convert_to_shards(a.dataecho, path, a.shards, os.path.join(a.out, "shards"), name)
            summary["splits"][name]["shards"] = [os.path.relpath(f, a.out) for f in files]
            print(f"gcide_split: {name}: {a.shards} shards in {os.path.join(a.out, 'shards')}")
    with open(os.path.join(a.out, "split.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
