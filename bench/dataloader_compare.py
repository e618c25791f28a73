#!/usr/bin/python3
"""The PyTorch side of bench/dataloader_compare.sh.

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

The windows, the CPU time and the PSS sampling are bench/loader_measure.py's, which
bench/ffcv_side.py uses too. Images per CPU-second are measured too (this process plus
the workers' utime + stime from /proc over the same window): on a machine shared with
other work, the load disturbs that figure least. Prints one JSON object; peak RSS of the
worker processes (VmHWM, read from /proc before they exit) is included, since
/usr/bin/time -v around this script reports the largest single process only.
"""
import argparse
import json
import os

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from loader_measure import PssSampler, measure_windows, summary, vm_hwm_kib

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def worker_init(_worker_id):
    torch.set_num_threads(1)


def grey_loader(path):
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("L")


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
    # Workers are processes: each epoch's iterator knows their pids.
    m = measure_windows(loader, a.epochs, a.window_seconds, pss,
                        worker_pids=lambda it: [w.pid for w in getattr(it, "_workers", [])])
    workers_hwm = [vm_hwm_kib(pid) for pid in m["worker_pids"]]
    out = {
        "mode": "dataloader",
        "workload": a.workload,
        "num_workers": a.workers,
        **summary(m, a.window_seconds),
        "main_vm_hwm_kib": vm_hwm_kib(os.getpid()),
        "peak_pss_sum_kib": pss.stop(),
        "workers_vm_hwm_kib": workers_hwm,
        "torch": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
