"""What fresh memory costs on this machine, for bench/dataloader_compare.sh.

Usage: python3 bench/page_fault_cost.py [--mib N] [--rounds R]

Maps N MiB of anonymous memory (default 77: one float32 batch of 128 x 3 x 224 x 224),
writes one byte per 4 KiB page (each write faults a zeroed page in), and unmaps it, R
times (default 5); then copies N MiB between two buffers already faulted in. Prints one
JSON object: the median microseconds per page fault and the warm copy's GB/s.

Why it matters: a loader that allocates every batch afresh (the DataLoader's collated
batches in shared memory, FFCV's CHW copy) pays one fault per 4 KiB page of it, while
dataecho reuses its batch buffers (the block cache, src/core/block_cache.cc). On bare
metal a fault costs well under a microsecond; in some virtual machines it costs ten
times that or more, and the loaders' ratios change with it (docs/dataloader.md).
"""

import argparse
import json
import mmap
import statistics
import time

import numpy as np

PAGE = 4096


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=77)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    n = a.mib << 20
    per_page = []
    for _ in range(a.rounds):
        m = mmap.mmap(-1, n)
        view = np.frombuffer(m, dtype=np.uint8)
        t = time.perf_counter()
        view[::PAGE] = 1
        per_page.append((time.perf_counter() - t) / (n // PAGE) * 1e6)
        del view
        m.close()
    src = np.ones(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    copies = []
    for _ in range(a.rounds):
        t = time.perf_counter()
        np.copyto(dst, src)
        copies.append(n / (time.perf_counter() - t) / 1e9)
    print(json.dumps({"mib": a.mib, "rounds": a.rounds,
                      "page_fault_us": round(statistics.median(per_page), 3),
                      "page_fault_us_rounds": [round(x, 3) for x in per_page],
                      "warm_copy_gb_per_s": round(statistics.median(copies), 2)}))


if __name__ == "__main__":
    main()
