#!/usr/bin/python3
"""Both sides of bench/text_compare.sh: a text -> tokenize -> bucket -> pad pipeline
from Python, dataecho's against torch's DataLoader, over the same files.

  text_compare.py corpus --out DIR --mb 16        write the corpus (see make_corpus)
  text_compare.py run --side dataecho|dataloader --workers T --files 'DIR/*.txt'

Both sides do the same work per epoch, in file order (no shuffling):
  * read the lines of the files (plain UTF-8 text; a "\\r" before "\\n" dropped; empty
    lines skipped) and check that each is valid UTF-8;
  * tokenize as bytes: each UTF-8 byte its id (0..255), the EOS id 256 appended, int32;
  * bucket by length (tokens with the EOS): bucket 0 takes lengths < 128, then [128,
    256), [256, 512), [512, 1024), [1024, 2048), >= 2048, with batch sizes 128, 64, 32,
    16, 8 and 4; a bucket's batch is emitted when full, the partial ones at the end,
    bucket by bucket;
  * pad each batch to its longest row with 0: tokens int32 [rows, longest] and
    tokens_length int32 [rows].

dataecho: de.text(files).map("tokenize", tokenizer="bytes", parallelism=P)
.bucket(boundaries, batch_sizes) [.prefetch(4)]; workers 0: P = 1 and no prefetch
(everything runs inside next() on the calling thread); workers T >= 1: P = T map
threads and a prefetch thread running the source and bucket. Batches reach Python as
torch tensors (DLPack, no copy). The pipeline is built once per epoch.

DataLoader: an IterableDataset (each worker takes every T-th file, so the workers
together read each line once) that reads lines with Python's buffered binary file,
decodes each as UTF-8 (the check), tokenizes it with numpy (np.frombuffer into an
int32 array one longer, the EOS written last; torch.from_numpy, no copy) and buckets
by the same rule; a batch's collate_fn (DataLoader batch_size=None: called per bucket
batch, inside the worker) pads with torch.nn.utils.rnn.pad_sequence and makes the
lengths tensor. num_workers T, persistent workers, torch.set_num_threads(1) in every
process. With workers, each worker buckets its own lines: the batches differ from the
single-stream ones by the partial batches at the ends, the tokens are the same.

Measurement: bench/loader_measure.py's measure_windows (windows of whole epochs back
to back until `window_seconds` after the window's first batch; the rate counts what
came after that first batch), counting tokens: each batch is handed to it as an object
whose shape[0] is the batch's real tokens (sum of tokens_length: padding not counted).
Examples per second are tokens per second times the epoch's examples over its tokens
(whole epochs, the same every epoch). Memory: loader_measure.PssSampler, the peak of
the summed PSS of this process and its worker processes, sampled every 0.2 s.
Prints one JSON object.
"""
import argparse
import bisect
import glob
import gzip
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_measure import PssSampler, measure_windows, summary, vm_hwm_kib  # noqa: E402

BOUNDARIES = [128, 256, 512, 1024, 2048]
BATCH_SIZES = [128, 64, 32, 16, 8, 4]
EOS = 256


def make_corpus(out, mb, files=4, seed=2026):
    """Paragraphs of the English text Debian ships under /usr/share/doc (copyright files,
    READMEs, changelogs, plain or gzip), each joined into one line (so lines run from a
    few words to a few thousand bytes, as documents do), in a seeded random order,
    repeated if needed to reach `mb` MB, split over `files` files."""
    paths = sorted(p for p in glob.glob("/usr/share/doc/**/*", recursive=True)
                   if os.path.isfile(p) and not os.path.islink(p)
                   and any(k in os.path.basename(p).lower() for k in ("copyright", "readme", "changelog", "news")))
    paragraphs = []
    for p in paths:
        try:
            raw = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
        except (OSError, EOFError):
            continue
        text = raw.decode("utf-8", errors="replace").replace("\r", "")
        for para in text.split("\n\n"):
            line = " ".join(para.split())
            if len(line) >= 2:
                paragraphs.append(line)
    random.Random(seed).shuffle(paragraphs)
    target = int(mb * 1e6)
    os.makedirs(out, exist_ok=True)
    outs = [open(os.path.join(out, f"part-{i}.txt"), "w", encoding="utf-8") for i in range(files)]
    written = lines = 0
    while written < target:
        for line in paragraphs:
            outs[lines % files].write(line + "\n")
            written += len(line.encode()) + 1
            lines += 1
            if written >= target:
                break
    for f in outs:
        f.close()
    lengths = sorted(len(p.encode()) + 1 for p in paragraphs)
    q = lambda f: lengths[int(f * (len(lengths) - 1))]  # noqa: E731
    print(json.dumps({"files": files, "bytes": written, "lines": lines, "source_paths": len(paths),
                      "paragraphs": len(paragraphs), "tokens_per_line_p10_p50_p90_p99":
                      [q(0.1), q(0.5), q(0.9), q(0.99)]}))


class Tokens:
    """A batch as measure_windows sees it: shape[0] is its real tokens."""

    def __init__(self, padded, lengths):
        self.shape = (int(lengths.sum()),)
        self.dtype = padded.dtype
        self.rows = padded.shape[0]
        self._padded = padded

    def is_contiguous(self):
        return self._padded.is_contiguous()


class Counting:
    """Wraps an iterable of {"tokens", "tokens_length"} batches for measure_windows,
    counting the examples and tokens of the last full epoch."""

    def __init__(self, make_iter):
        self.make_iter = make_iter
        self.epoch = {"examples": 0, "tokens": 0, "batches": 0, "pad_tokens": 0}

    def __iter__(self):
        it = self.make_iter()  # made now: measure_windows asks for its workers next
        self.last_iter = it
        return self._batches(it)

    def _batches(self, it):
        n = {"examples": 0, "tokens": 0, "batches": 0, "pad_tokens": 0}
        for b in it:
            t = Tokens(b["tokens"], b["tokens_length"])
            n["examples"] += t.rows
            n["tokens"] += t.shape[0]
            n["batches"] += 1
            n["pad_tokens"] += b["tokens"].numel() - t.shape[0]
            yield t, None
        self.epoch = n


def dataecho_loader(files, workers):
    import dataecho as de
    d = de.text(files).map("tokenize", tokenizer="bytes", parallelism=max(workers, 1))
    d = d.bucket(BOUNDARIES, BATCH_SIZES)
    if workers >= 1:
        d = d.prefetch(4)

    def epoch():
        with d.build() as p:
            yield from p
    return Counting(epoch), lambda it: []


class TextBuckets(torch.utils.data.IterableDataset):
    def __init__(self, files):
        self.files = files

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        files = self.files if info is None else self.files[info.id::info.num_workers]
        buckets = [[] for _ in BATCH_SIZES]
        for path in files:
            with open(path, "rb") as f:
                for line in f:
                    line = line.rstrip(b"\n")
                    if line.endswith(b"\r"):
                        line = line[:-1]
                    if not line:
                        continue
                    line.decode("utf-8")  # the UTF-8 check the text source makes
                    n = len(line)
                    ids = np.empty(n + 1, dtype=np.int32)
                    ids[:n] = np.frombuffer(line, dtype=np.uint8)
                    ids[n] = EOS
                    k = bisect.bisect_right(BOUNDARIES, n + 1)
                    buckets[k].append(torch.from_numpy(ids))
                    if len(buckets[k]) == BATCH_SIZES[k]:
                        yield buckets[k]
                        buckets[k] = []
        for b in buckets:
            if b:
                yield b


def pad_collate(seqs):
    return {"tokens": torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0),
            "tokens_length": torch.tensor([len(s) for s in seqs], dtype=torch.int32)}


def worker_init(_worker_id):
    torch.set_num_threads(1)


def dataloader_loader(files, workers):
    loader = torch.utils.data.DataLoader(
        TextBuckets(files), batch_size=None, collate_fn=pad_collate, num_workers=workers,
        worker_init_fn=worker_init if workers > 0 else None, persistent_workers=workers > 0)
    counting = Counting(lambda: iter(loader))
    return counting, lambda it: [w.pid for w in getattr(counting.last_iter, "_workers", [])]


def run(a):
    torch.set_num_threads(1)
    files = sorted(glob.glob(a.files))
    pss = PssSampler()
    make = dataecho_loader if a.side == "dataecho" else dataloader_loader
    loader, worker_pids = make(files, a.workers)
    m = measure_windows(loader, a.windows, a.window_seconds, pss, worker_pids=lambda it: worker_pids(it))
    s = summary(m, a.window_seconds)
    ep = loader.epoch
    per_token = ep["examples"] / ep["tokens"]
    out = {
        "side": a.side, "workers": a.workers, "files": files,
        "tokens_per_s": s["images_per_s"], "min_tokens_per_s": s["min_images_per_s"],
        "max_tokens_per_s": s["max_images_per_s"], "windows_tokens_per_s": s["epochs_images_per_s"],
        "examples_per_s": s["images_per_s"] * per_token,
        "tokens_per_cpu_s": s["images_per_cpu_s"], "window_seconds": a.window_seconds,
        "epoch": ep, "peak_pss_sum_kib": pss.stop(), "main_vm_hwm_kib": vm_hwm_kib(os.getpid()),
        "workers_vm_hwm_kib": [vm_hwm_kib(p) for p in m["worker_pids"]],
        "torch": torch.__version__, "numpy": np.__version__, "load_average": os.getloadavg(),
    }
    print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--out", required=True)
    c.add_argument("--mb", type=float, default=16)
    r = sub.add_parser("run")
    r.add_argument("--side", choices=["dataecho", "dataloader"], required=True)
    r.add_argument("--workers", type=int, default=0)
    r.add_argument("--files", required=True, help="a glob of the corpus files")
    r.add_argument("--windows", type=int, default=3)
    r.add_argument("--window-seconds", type=float, default=5.0)
    a = p.parse_args()
    if a.cmd == "corpus":
        make_corpus(a.out, a.mb)
    else:
        run(a)


if __name__ == "__main__":
    main()
