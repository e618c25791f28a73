#!/usr/bin/python3
"""Writes the seed corpus of fuzz/jpeg_huffman_fuzz.cc into fuzz/corpus/jpeg_huffman.

Each file is one option byte (tests/image/jpeg_huffman_check.h says what it chooses)
and a JPEG. The JPEGs come from several encoders and settings, so that the Huffman
decoder meets the tables, layouts and byte patterns that real files have:
  - libjpeg-turbo through PIL and through OpenCV, at several qualities, with optimized
    (fitted) Huffman tables, progressive, with restart intervals;
  - libjpeg-turbo's cjpeg for the layouts the others do not offer (4:4:0, arithmetic
    coding, restart markers every MCU);
  - FFmpeg's MJPEG encoder (its own code, not libjpeg's), 4:2:0, 4:2:2 and 4:4:4;
  - Guetzli (Google's encoder, its own Huffman coder);
  - grey, 4:4:4, 4:2:2, 4:2:0 and 4:4:0; CMYK (both decoders must refuse alike);
  - tiny and odd sizes; smooth images (short codes) and noise (long codes, large
    values, many 0xFF bytes to unstuff);
  - a few damaged copies (bytes overwritten, cut short), deterministic.
Needs Debian's python3-pil, python3-opencv, python3-numpy, ffmpeg, guetzli and
libjpeg-turbo-progs (not the tests: they read the committed files).
  scripts/make_jpeg_corpus.py [OUT_DIR]
"""
import io
import os
import random
import subprocess
import sys
import tempfile

import cv2
import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus", "jpeg_huffman")


def image(h, w, kind, seed, channels=3):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    if kind == "smooth":
        base = (x * 255 // max(w - 1, 1) + y * 97 // max(h - 1, 1)) % 256
        img = np.stack([(base + 60 * c) % 256 for c in range(channels)], axis=-1)
    elif kind == "noise":
        img = rng.integers(0, 256, (h, w, channels))
    else:  # half and half
        img = np.stack([(x * 7 + y * 3 + 80 * c) % 256 for c in range(channels)], axis=-1)
        img[:, w // 2 :] = rng.integers(0, 256, (h, w - w // 2, channels))
    return img.astype(np.uint8)


SIZES = [(1, 1), (7, 5), (8, 8), (16, 16), (17, 33), (37, 23), (64, 48), (3, 120), (96, 72)]
KINDS = ["smooth", "noise", "mixed"]
corpus = {}


def add(name, data):
    corpus[name] = data


def pil(img, name, **kw):
    buf = io.BytesIO()
    mode = "L" if img.shape[2] == 1 else "RGB"
    Image.fromarray(img[:, :, 0] if mode == "L" else img, mode).save(buf, "JPEG", **kw)
    add("pil_" + name, buf.getvalue())


def run(cmd, data=None):
    return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          check=True).stdout


def ppm(img):
    h, w, c = img.shape
    return (b"P%d\n%d %d\n255\n" % (5 if c == 1 else 6, w, h)) + img.tobytes()


n = 0
for (h, w) in SIZES:
    for kind in KINDS:
        n += 1
        rgb = image(h, w, kind, n)
        grey = image(h, w, kind, n, 1)
        tag = f"{w}x{h}_{kind}"
        # PIL (libjpeg-turbo): qualities, chroma layouts, fitted tables, progressive
        for q, sub in [(10, 2), (50, 1), (75, 2), (90, 0), (100, 0)]:
            if (h * w > 64 or q == 75):
                pil(rgb, f"{tag}_q{q}_s{sub}.jpg", quality=q, subsampling=sub)
        pil(rgb, f"{tag}_opt.jpg", quality=90, optimize=True)
        pil(grey, f"{tag}_grey.jpg", quality=85)
        if h * w > 64:
            pil(rgb, f"{tag}_prog.jpg", quality=80, progressive=True)
        # OpenCV (libjpeg-turbo): restart intervals, fitted tables
        if h * w > 64:
            bgr = np.ascontiguousarray(rgb[:, :, ::-1])
            ok, enc = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 92,
                                               cv2.IMWRITE_JPEG_RST_INTERVAL, 2])
            add(f"cv2_{tag}_rst.jpg", enc.tobytes())
            ok, enc = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 60,
                                               cv2.IMWRITE_JPEG_OPTIMIZE, 1])
            add(f"cv2_{tag}_opt.jpg", enc.tobytes())
        # cjpeg: 4:4:0, arithmetic coding, restart every MCU
        if kind != "smooth" or h * w > 64:
            add(f"cjpeg_{tag}_440.jpg", run(["cjpeg", "-quality", "88", "-sample", "1x2"], ppm(rgb)))
        if kind == "mixed" and h * w > 64:
            add(f"cjpeg_{tag}_arith.jpg", run(["cjpeg", "-arithmetic"], ppm(rgb)))
            add(f"cjpeg_{tag}_rst1.jpg", run(["cjpeg", "-restart", "1B"], ppm(rgb)))
            add(f"cjpeg_{tag}_opt444.jpg",
                run(["cjpeg", "-quality", "97", "-sample", "1x1", "-optimize"], ppm(rgb)))

# FFmpeg's MJPEG encoder (even sizes for 4:2:0)
with tempfile.TemporaryDirectory() as tmp:
    for (h, w) in [(16, 16), (24, 40), (48, 64), (72, 96)]:
        for kind in KINDS:
            rgb = image(h, w, kind, h * w)
            for pix in ["yuvj420p", "yuvj422p", "yuvj444p"]:
                for q in [2, 10]:
                    out = os.path.join(tmp, "f.jpg")
                    run(["ffmpeg", "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
                         "-s", f"{w}x{h}", "-i", "-", "-frames:v", "1", "-c:v", "mjpeg",
                         "-q:v", str(q), "-pix_fmt", pix, "-huffman", "optimal" if q == 2 else "default",
                         out], rgb.tobytes())
                    add(f"ffmpeg_{w}x{h}_{kind}_{pix}_q{q}.jpg", open(out, "rb").read())
    # Guetzli (slow: a few small images)
    for (h, w), kind, q in [((32, 32), "mixed", 84), ((48, 64), "smooth", 95), ((40, 40), "noise", 90)]:
        src, out = os.path.join(tmp, "g.png"), os.path.join(tmp, "g.jpg")
        Image.fromarray(image(h, w, kind, 7)).save(src)  # Guetzli reads PNG
        run(["guetzli", "--quality", str(q), src, out])
        add(f"guetzli_{w}x{h}_{kind}_q{q}.jpg", open(out, "rb").read())

# CMYK: both decoders must refuse alike
cmyk = Image.fromarray(image(24, 32, "mixed", 3)).convert("CMYK")
buf = io.BytesIO()
cmyk.save(buf, "JPEG", quality=90)
add("pil_32x24_cmyk.jpg", buf.getvalue())

# Damaged copies: bytes overwritten past the headers, or cut short
rng = random.Random(2026)
valid = sorted(corpus)
for i in range(24):
    name = valid[rng.randrange(len(valid))]
    data = bytearray(corpus[name])
    start = len(data) // 3
    if i % 2:
        for _ in range(1 + rng.randrange(3)):
            data[start + rng.randrange(len(data) - start)] = rng.randrange(256)
        add(f"damaged_{i}_{name}", bytes(data))
    else:
        add(f"cut_{i}_{name}", bytes(data[: start + rng.randrange(len(data) - start)]))

os.makedirs(OUT, exist_ok=True)
for f in os.listdir(OUT):
    os.remove(os.path.join(OUT, f))
total = 0
for i, name in enumerate(sorted(corpus)):
    option = bytes([(i * 5) % 8])  # scale 1/1..1/8 and grey in turn; no skipped MCUs
    with open(os.path.join(OUT, name[:-4] + ".fuzz"), "wb") as f:
        f.write(option + corpus[name])
    total += 1 + len(corpus[name])
print(f"make_jpeg_corpus: {len(corpus)} files, {total} bytes in {OUT}")
