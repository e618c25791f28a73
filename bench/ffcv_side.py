#!/usr/bin/python3
"""The FFCV side of bench/dataloader_compare.sh.

Debian's python3-ffcv 0.0.3 (with python3-numba and python3-opencv), under Debian's
/usr/bin/python3. Three commands:

  check   prints FFCV's, numba's and OpenCV's versions; exits 1, saying why, when FFCV
          cannot be imported (dataloader_compare.sh then skips this side, loudly).

  write --src DIR --beton FILE --out DIR
          Writes FILE from the JPEGs in DIR/class_K/*.jpg (bench/make_photos.py's) with
          FFCV's own DatasetWriter: fields "image" = RGBImageField(write_mode="jpg",
          max_resolution=<largest side + 1>, jpeg_quality=90) and "label" = IntField()
          (K). FFCV 0.0.3 does not store the file's bytes: it decodes each image (PIL, to
          an RGB array, as FFCV's own ImageNet example does) and encodes it again with
          OpenCV's cv2.imencode at jpeg_quality. So the bytes every other side reads are
          taken back out of the .beton: for each sample, its metadata's data_ptr, the
          size the allocation table records for that pointer, and those bytes of the file.
          They are written to --out under the same names (class_K/photo_NNNNN.jpg) with
          SHA256SUMS; dataloader_compare.sh then makes the tar shards from that folder.
          Checks that every sample is stored as JPEG at its source's width and height
          (max_resolution shrank nothing), and writes FILE.json: the sizes of the source
          and of the stored files.

  verify --beton FILE --dir DIR --tar GLOB
          Checks that the folder's files and the tar shards' .jpg members are byte for
          byte the .beton's images (the same multiset of SHA-256 digests and sizes).

  run --beton FILE --workers N [--epochs E] [--window-seconds S]
          Measures FFCV's Loader over FILE as dataloader_compare.py measures the
          DataLoader (bench/loader_measure.py: windows of at least S s of epochs back to
          back, the median window with min and max, images per CPU-second, peak summed
          PSS sampled every 0.2 s). The pipeline:
            image: RandomResizedCropRGBImageDecoder((224, 224)) (full decode with
                   libjpeg-turbo, then a crop of torchvision's scale (0.08, 1) and ratio
                   (3/4, 4/3) resized by OpenCV to 224x224), RandomHorizontalFlip(),
                   NormalizeImage(ImageNet mean * 255, std * 255, np.float32) (a lookup
                   table, uint8 HWC -> float32 HWC), ToTensor(), ToTorchImage(
                   channels_last=False): float32 batches of 128 x 3 x 224 x 224, laid out
                   CHW in memory like the other sides' (--channels-last keeps FFCV's
                   default instead: an NCHW view of NHWC memory, one copy less);
            label: IntDecoder(), ToTensor();
          Loader(batch_size=128, num_workers=N, order=OrderOption.RANDOM, os_cache=True,
          drop_last=False, batches_ahead=3 (FFCV's default), seed=7).
          FFCV's workers are threads, not processes: numba's parallel loops (prange)
          over the batch with N threads, run from one background thread per epoch
          (EpochIterator); N = 1 runs each batch in that one thread. There is no
          0-worker mode (num_workers < 1 means all cores). So summed PSS is this one
          process's PSS, which counts the pages of the .beton it has touched through its
          memory map (os_cache=True), as RSS does.
          Before the windows, one untimed warm-up epoch: numba compiles the pipeline on
          the first batches (warmup_s in the JSON). Checks the batches: float32,
          [128, 3, 224, 224], contiguous unless --channels-last, values inside the
          normalised range; exits 1 if not. Prints one JSON object.
"""
import argparse
import hashlib
import json
import os
import sys
import time

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def versions():
    from importlib.metadata import version
    import cv2
    import numba
    import subprocess
    try:
        deb = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-ffcv"],
                             capture_output=True, text=True).stdout or None
    except OSError:
        deb = None
    return {"ffcv": version("ffcv"), "ffcv_debian": deb, "numba": numba.__version__, "opencv": cv2.__version__}


def cmd_check(_a):
    try:
        import ffcv  # noqa: F401
        v = versions()
    except Exception as e:  # ImportError, or one of its dependencies failing to load
        print(f"FFCV cannot be imported by {sys.executable}: {type(e).__name__}: {e}"
              " (apt-get install python3-ffcv python3-numba python3-opencv;"
              " scripts/bootstrap.sh --bench-deps installs them)", file=sys.stderr)
        sys.exit(1)
    print(" ".join(f"{k} {x}" for k, x in v.items()))


def source_files(src):
    """(relative path, label) in ImageFolder's order: class folders sorted, files sorted."""
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    out = []
    for k, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(src, c))):
            if f.endswith(".jpg"):
                out.append((os.path.join(c, f), k))
    return out


class JpegFolder:
    """An indexable dataset for FFCV's writer: (RGB uint8 HWC array, label)."""

    def __init__(self, src, files):
        self.src, self.files = src, files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import numpy as np
        from PIL import Image
        rel, label = self.files[i]
        with Image.open(os.path.join(self.src, rel)) as img:
            return np.asarray(img.convert("RGB")), label


def stored_images(beton):
    """Per sample: (mode, width, height, the stored bytes as a read-only memoryview)."""
    import numpy as np
    from ffcv.reader import Reader
    r = Reader(beton)
    meta = r.metadata["f0"]  # field 0 is "image"
    table = np.sort(r.alloc_table, order="ptr")
    data = np.memmap(beton, "uint8", mode="r")
    out = []
    for m in meta:
        ptr = int(m["data_ptr"])
        k = int(np.searchsorted(table["ptr"], ptr))
        if k >= len(table) or int(table["ptr"][k]) != ptr:
            raise SystemExit(f"ffcv_side: {beton}: no allocation at {ptr}")
        size = int(table["size"][k])
        out.append((int(m["mode"]), int(m["width"]), int(m["height"]),
                    memoryview(data[ptr:ptr + size])))
    return out


def cmd_write(a):
    from PIL import Image
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    files = source_files(a.src)
    if not files:
        raise SystemExit(f"ffcv_side: no class_K/*.jpg under {a.src}")
    sizes = []
    for rel, _ in files:
        with Image.open(os.path.join(a.src, rel)) as img:
            sizes.append(img.size)
    max_side = max(max(s) for s in sizes)
    max_resolution = max_side + 1  # above the largest side: FFCV resizes nothing
    t0 = time.perf_counter()
    fields = {"image": RGBImageField(write_mode="jpg", max_resolution=max_resolution, jpeg_quality=90),
              "label": IntField()}
    DatasetWriter(a.beton, fields, num_workers=a.workers).from_indexed_dataset(JpegFolder(a.src, files))
    write_s = time.perf_counter() - t0

    stored = stored_images(a.beton)
    if len(stored) != len(files):
        raise SystemExit(f"ffcv_side: {a.beton} holds {len(stored)} samples, {len(files)} files given")
    sums, src_bytes, out_bytes = [], [], []
    for (rel, _), (w, h), (mode, sw, sh, data) in zip(files, sizes, stored):
        if mode != 0:  # IMAGE_MODES['jpg']
            raise SystemExit(f"ffcv_side: {rel} stored in mode {mode}, not jpg")
        if (sw, sh) != (w, h):
            raise SystemExit(f"ffcv_side: {rel} stored at {sw}x{sh}, source {w}x{h}")
        path = os.path.join(a.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {rel}\n")
        src_bytes.append(os.path.getsize(os.path.join(a.src, rel)))
        out_bytes.append(len(data))
    with open(os.path.join(a.out, "SHA256SUMS"), "w") as f:
        f.writelines(sums)

    def stats(v):
        s = sorted(v)
        return {"total": sum(s), "min": s[0], "median": s[len(s) // 2], "max": s[-1]}
    info = {"images": len(files), "max_side": max_side, "max_resolution": max_resolution,
            "jpeg_quality": 90, "write_mode": "jpg", "write_s": round(write_s, 1),
            "source_bytes": stats(src_bytes), "stored_bytes": stats(out_bytes),
            "beton_bytes": os.path.getsize(a.beton), "versions": versions(),
            "method": "each sample's bytes taken from the .beton (metadata data_ptr, allocation"
                      " table size) and written under the source's name"}
    with open(a.beton + ".json", "w") as f:
        json.dump(info, f, indent=2)
    print(f"ffcv_side: {a.beton}: {len(files)} images re-encoded by FFCV (OpenCV, quality 90) in"
          f" {write_s:.1f} s, {info['stored_bytes']['total'] / 1e6:.1f} MB"
          f" (source {info['source_bytes']['total'] / 1e6:.1f} MB), median"
          f" {info['stored_bytes']['median']} bytes (source {info['source_bytes']['median']});"
          f" max_resolution {max_resolution}; the stored bytes written to {a.out}", file=sys.stderr)


def digests(blobs):
    return sorted((hashlib.sha256(b).hexdigest(), len(b)) for b in blobs)


def cmd_verify(a):
    import glob
    import tarfile
    beton = digests(bytes(d) for _, _, _, d in stored_images(a.beton))
    folder = []
    for rel, _ in source_files(a.dir):
        with open(os.path.join(a.dir, rel), "rb") as f:
            folder.append(f.read())
    shards = sorted(glob.glob(a.tar))
    members = []
    for s in shards:
        with tarfile.open(s) as t:
            for m in t:
                if m.isfile() and m.name.endswith(".jpg"):
                    members.append(t.extractfile(m).read())
    for name, got in (("folder " + a.dir, digests(folder)), (f"{len(shards)} tar shards " + a.tar, digests(members))):
        if got != beton:
            raise SystemExit(f"ffcv_side: {name}: {len(got)} files, not byte for byte the"
                             f" .beton's {len(beton)} images")
    print(f"ffcv_side: the folder and the tar shards hold the .beton's {len(beton)} images byte for"
          f" byte ({sum(n for _, n in beton)} bytes, SHA-256 each)", file=sys.stderr)


def cmd_run(a):
    import numpy as np
    import torch
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.rgb_image import RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, ToTensor, ToTorchImage

    from loader_measure import PssSampler, measure_windows, summary, vm_hwm_kib

    if a.workers < 1:
        raise SystemExit("ffcv_side: FFCV has no 0-worker mode (num_workers < 1 means all cores)")
    pss = PssSampler()
    mean = np.array(IMAGENET_MEAN) * 255
    std = np.array(IMAGENET_STD) * 255
    pipelines = {
        "image": [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip(),
                  NormalizeImage(mean, std, np.float32), ToTensor(),
                  ToTorchImage(channels_last=a.channels_last)],
        "label": [IntDecoder(), ToTensor()],
    }
    order = OrderOption.SEQUENTIAL if a.sequential else OrderOption.RANDOM
    loader = Loader(a.beton, batch_size=a.batch, num_workers=a.workers, order=order,
                    os_cache=True, drop_last=False, batches_ahead=a.batches_ahead,
                    seed=7, pipelines=pipelines)

    # Warm-up, untimed: numba compiles every stage on the first batch.
    t0 = time.perf_counter()
    lo, hi = (0 - max(IMAGENET_MEAN)) / min(IMAGENET_STD), (1 - min(IMAGENET_MEAN)) / min(IMAGENET_STD)
    for i, (x, y) in enumerate(loader):
        ok = (x.dtype == torch.float32 and list(x.shape[1:]) == [3, 224, 224]
              and x.shape[0] == y.shape[0] and (a.channels_last or x.is_contiguous())
              and lo - 1e-3 <= float(x.min()) and float(x.max()) <= hi + 1e-3)
        if not ok or (i == 0 and x.shape[0] != a.batch):
            raise SystemExit(f"ffcv_side: batch {i}: {x.dtype} {list(x.shape)}, contiguous"
                             f" {x.is_contiguous()}, values {float(x.min()):.3f}..{float(x.max()):.3f};"
                             f" wanted float32 [{a.batch}, 3, 224, 224] within {lo:.3f}..{hi:.3f}")
    warmup_s = time.perf_counter() - t0
    print(f"  warm-up epoch (numba compiles the pipeline): {warmup_s:.1f} s", file=sys.stderr)

    m = measure_windows(loader, a.epochs, a.window_seconds, pss)
    if m["first_batch"].get("batch_shape") != [a.batch, 3, 224, 224] or m["first_batch"].get("batch_dtype") != "torch.float32":
        raise SystemExit(f"ffcv_side: measured batches {m['first_batch']}")
    import numba
    out = {
        "mode": "ffcv",
        "workload": "photo",
        "num_workers": a.workers,
        **summary(m, a.window_seconds),
        "warmup_s": warmup_s,
        "main_vm_hwm_kib": vm_hwm_kib(os.getpid()),
        "peak_pss_sum_kib": pss.stop(),
        "workers_vm_hwm_kib": [],
        "layout": "channels_last" if a.channels_last else "contiguous CHW",
        "order": order.name,
        "batches_ahead": a.batches_ahead,
        "os_cache": True,
        "drop_last": False,
        "numba_threading_layer": numba.threading_layer(),
        "numba_num_threads": numba.get_num_threads(),
        **versions(),
    }
    print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check")
    w = sub.add_parser("write")
    w.add_argument("--src", required=True)
    w.add_argument("--beton", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--workers", type=int, default=-1, help="writer processes (FFCV's default: all cores)")
    v = sub.add_parser("verify")
    v.add_argument("--beton", required=True)
    v.add_argument("--dir", required=True)
    v.add_argument("--tar", required=True, help="glob of the tar shards")
    r = sub.add_parser("run")
    r.add_argument("--beton", required=True)
    r.add_argument("--workers", type=int, required=True)
    r.add_argument("--epochs", type=int, default=3, help="measured windows")
    r.add_argument("--window-seconds", type=float, default=5.0)
    r.add_argument("--batch", type=int, default=128)
    r.add_argument("--batches-ahead", type=int, default=3)
    r.add_argument("--channels-last", action="store_true",
                   help="FFCV's default ToTorchImage: an NCHW view of NHWC memory")
    r.add_argument("--sequential", action="store_true", help="OrderOption.SEQUENTIAL instead of RANDOM")
    a = p.parse_args()
    {"check": cmd_check, "write": cmd_write, "verify": cmd_verify, "run": cmd_run}[a.cmd](a)


if __name__ == "__main__":
    main()
