#!/usr/bin/python3
"""What `import dataecho` adds to a process that has imported torch and numpy, from
/proc/self/smaps_rollup (RSS, PSS, and PSS split into anonymous and file-backed), one
line per stage. Run from the repository root, one process per measurement:

  PYTHONPATH=build/python bench/import_pss.py package     # import dataecho
  PYTHONPATH=build/python bench/import_pss.py core        # the extension alone, then the package
  PYTHONPATH=build/python bench/import_pss.py pipe 'DIR/*.txt'
      # then 3 epochs of text -> tokenize -> bucket (bench/text_compare.py's pipeline at
      # 0 workers) over those files

docs/text.md and results/text_2026-12-03-quiet/README.txt give its figures.
"""
import glob
import importlib.util
import os
import sys

KEYS = ("Rss:", "Pss:", "Pss_Anon:", "Pss_File:")


def rollup():
    d = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            p = line.split()
            if p[0] in KEYS:
                d[p[0][:-1]] = int(p[1])
    return d


def show(tag, base=None):
    r = rollup()
    print(f"{tag:<26}" + "  ".join(
        f"{k} {v / 1024:.2f} MiB" + (f" (+{(v - base[k]) / 1024:.2f})" if base else "")
        for k, v in r.items()), flush=True)
    return r


def main():
    import numpy  # noqa: F401
    import torch
    torch.set_num_threads(1)
    mode = sys.argv[1] if len(sys.argv) > 1 else "package"
    b0 = show("torch + numpy")
    if mode == "core":
        path = glob.glob(os.path.join(os.environ["PYTHONPATH"].split(":")[0], "dataecho", "_core*.so"))[0]
        spec = importlib.util.spec_from_file_location("dataecho._core", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        b0 = show("the extension alone", b0)
    import dataecho as de
    b1 = show("import dataecho", b0)
    if mode == "pipe":
        d = de.text(sorted(glob.glob(sys.argv[2]))).map("tokenize", tokenizer="bytes", parallelism=1)
        d = d.bucket([128, 256, 512, 1024, 2048], [128, 64, 32, 16, 8, 4])
        for ep in range(3):
            n = 0
            with d.build() as p:
                for _ in p:
                    n += 1
            show(f"after epoch {ep} ({n} batches)", b1)


if __name__ == "__main__":
    main()
