#!/usr/bin/python3
"""The Python side of bench/python_overhead.sh: a dataecho pipeline spec iterated from
Python (import dataecho), measured with the rule of bench/dataloader_bench.cc's
`pipeline` command, which iterates the same spec from C++: the pipeline is built once
per epoch, and an epoch's rate is the images after its first batch over the time from
the first batch to the last, so that start-up is charged to neither side. Each batch's
fields become torch tensors (DLPack, no copy), as a training loop would take them.

Prints one JSON object: images_per_s (the best epoch), median_images_per_s,
epochs_images_per_s, images_per_cpu_s, and the bytes copied on the way to Python
(0 unless a buffer was shared).
"""
import argparse
import json
import os
import sys
import time

import torch

import dataecho as de


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--as-numpy", action="store_true")
    ap.add_argument("--share-buffers", action="store_true",
                    help="build(share_buffers=True): shared (echoed) buffers without a copy")
    a = ap.parse_args()
    torch.set_num_threads(1)
    d = de.PipelineDef.from_spec(a.spec)
    rates, cpu_rates = [], []
    images = batches = 0
    for epoch in range(a.epochs):
        with d.build(as_numpy=a.as_numpy, share_buffers=a.share_buffers) as p:
            n = nb = after_first = 0
            for b in p:
                rows = b["image"].shape[0]
                if nb == 0:
                    t0, c0 = time.perf_counter(), time.process_time()
                else:
                    after_first += rows
                n += rows
                nb += 1
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rates.append(after_first / dt)
        cpu_rates.append(after_first / dc)
        images, batches = n, nb
        print(f"  epoch {epoch}: {n} images, {rates[-1]:.0f} images/s, {cpu_rates[-1]:.0f} images/cpu-s",
              file=sys.stderr)
    copied, shared = de._core.copy_counters()
    s = sorted(rates)
    print(json.dumps({"images_per_s": s[-1], "median_images_per_s": s[len(s) // 2], "epochs_images_per_s": rates,
                      "images_per_cpu_s": max(cpu_rates), "images_per_epoch": images, "batches_per_epoch": batches,
                      "copied_bytes": copied, "zero_copy_bytes": shared, "spec": a.spec, "share_buffers": a.share_buffers,
                      "python": sys.executable, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
