#!/usr/bin/python3
"""The PyTorch side of bench/dataloader_compare.sh (issue 8).

torch.utils.data.DataLoader over torchvision.datasets.ImageFolder with the torchvision
transforms equivalent to the dataecho spec, batch_size 128, no shuffling (dataecho's
spec does not shuffle either), measured over a few epochs with the same rule as
bench/dataloader_bench.cc: an epoch's rate is the images after its first batch over the
time from the first batch to the last, so that neither side pays for starting up.

Run with Debian's interpreter, /usr/bin/python3 (python3-torch 1.13, python3-torchvision
0.14, PIL 9.4 with libjpeg-turbo), not a pyenv python.

Fairness: torch.set_num_threads(1) in the main process and in every worker
(worker_init_fn), so that num_workers=N uses N cores for the transforms, as dataecho with
N threads does; torch's intra-op threads would otherwise compete with the workers on the
same cores. Workers are persistent, so epochs after the first do not re-fork them.

Workloads:
  jpeg  ImageFolder's default loader (PIL open + convert("RGB")), RandomResizedCrop(224),
        RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean/std).
  png   a grayscale loader (PIL open + convert("L"): the images are 1-channel, dataecho
        keeps one channel too; the default loader would make them RGB, 3x the work),
        RandomCrop(28, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std).

Images per CPU-second are measured too (this process plus the workers' utime + stime from
/proc over the same window): on a machine shared with other work, the load disturbs that
figure least. Prints one JSON object; peak RSS of the worker processes (VmHWM, read from /proc before
they exit) is included, since /usr/bin/time -v around this script reports the largest
single process only.
"""
import argparse
import json
import os
import sys
import threading
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def worker_init(_worker_id):
    torch.set_num_threads(1)


def grey_loader(path):
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("L")


def proc_kib(pid, name, key, missing=None):
    """A "Key: N kB" field of /proc/PID/NAME, in KiB (`missing` once the process has gone)."""
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return missing


def vm_hwm_kib(pid):
    return proc_kib(pid, "status", "VmHWM:")


def pss_kib(pid):
    """Proportional set size of a process (shared pages divided among their users)."""
    return proc_kib(pid, "smaps_rollup", "Pss:", 0)


class PssSampler:
    """The peak over time of the summed PSS of this process and its workers, sampled
    every 0.2 s on a thread of its own (workers' pids are set as they start)."""

    def __init__(self):
        self.pids = [os.getpid()]
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.2):
            self.peak_kib = max(self.peak_kib, sum(pss_kib(p) for p in list(self.pids)))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak_kib


TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """utime + stime of a process, seconds (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except OSError:
        return 0.0


def cpu_s(pids):
    """CPU seconds of this process (all threads) and of the workers `pids`."""
    return time.process_time() + sum(proc_cpu_s(p) for p in pids)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="class_name/file.ext folder")
    p.add_argument("--workload", choices=["jpeg", "png"], required=True)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--epochs", type=int, default=3, help="measured windows")
    p.add_argument("--window-seconds", type=float, default=5.0,
                   help="a window runs epochs back to back until this long after its first batch")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--mean", type=float, nargs="+", default=None)
    p.add_argument("--std", type=float, nargs="+", default=None)
    a = p.parse_args()

    torch.set_num_threads(1)
    pss = PssSampler()
    if a.workload == "jpeg":
        tf = transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(a.mean or IMAGENET_MEAN, a.std or IMAGENET_STD),
        ])
        ds = datasets.ImageFolder(a.root, transform=tf)
    else:
        tf = transforms.Compose([
            transforms.RandomCrop(28, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(a.mean or (0.0,), a.std or (1.0,)),
        ])
        ds = datasets.ImageFolder(a.root, transform=tf, loader=grey_loader)

    loader = DataLoader(ds, batch_size=a.batch, shuffle=False, num_workers=a.workers,
                        worker_init_fn=worker_init if a.workers > 0 else None,
                        persistent_workers=a.workers > 0)
    rates = []
    cpu_rates = []
    shape = None
    images = 0
    batches = 0
    worker_pids = []
    # A window: epochs back to back (as dataloader_bench's) until --window-seconds have
    # passed since its first batch; its rate counts the images after that batch.
    for window in range(a.epochs):
        first = None
        first_cpu = 0.0
        after_first = nb_window = passes = 0
        pids = []
        while first is None or time.perf_counter() - first < a.window_seconds:
            it = iter(loader)
            pids = [w.pid for w in getattr(it, "_workers", [])]
            pss.pids = [os.getpid()] + pids
            n = nb = 0
            for x, _y in it:
                rows = x.shape[0]
                if nb_window == 0:
                    first = time.perf_counter()
                    first_cpu = cpu_s(pids)
                    shape = list(x.shape)
                else:
                    after_first += rows
                n += rows
                nb += 1
                nb_window += 1
            images, batches = n, nb
            passes += 1
            if a.workers > 0 and not worker_pids:
                worker_pids = [w.pid for w in getattr(it, "_workers", [])]
        dt = time.perf_counter() - first
        rates.append(after_first / dt)
        cpu_rates.append(after_first / (cpu_s(pids) - first_cpu))
        print(f"  window {window}: {passes} passes, {dt:.1f} s, {rates[-1]:.0f} images/s,"
              f" {cpu_rates[-1]:.0f} images/cpu-s", file=sys.stderr)
    workers_hwm = [vm_hwm_kib(pid) for pid in worker_pids]
    srt = sorted(rates)
    out = {
        "mode": "dataloader",
        "workload": a.workload,
        "num_workers": a.workers,
        "images_per_s": srt[len(srt) // 2],
        "median_images_per_s": srt[len(srt) // 2],
        "min_images_per_s": srt[0],
        "max_images_per_s": srt[-1],
        "epochs_images_per_s": rates,
        "window_seconds": a.window_seconds,
        "images_per_cpu_s": sorted(cpu_rates)[len(cpu_rates) // 2],
        "epochs_images_per_cpu_s": cpu_rates,
        "images_per_epoch": images,
        "batches_per_epoch": batches,
        "batch_shape": shape,
        "main_vm_hwm_kib": vm_hwm_kib(os.getpid()),
        "peak_pss_sum_kib": pss.stop(),
        "workers_vm_hwm_kib": workers_hwm,
        "torch": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
