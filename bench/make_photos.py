"""Photographic JPEGs at ImageNet-like sizes for bench/dataloader_compare.sh.

Usage: python3 bench/make_photos.py --out DIR [--count N] [--seed S] [--source JPG]

Writes DIR/class_K/photo_NNNNN.jpg (K = N mod 10, the class folders ImageFolder reads)
and DIR/SHA256SUMS. Every file is a different view of a real photograph (by default the
portrait that Debian's python-matplotlib-data ships, 512x600): a random crop of 35-100% of
its area, scaled to a width of 400-560 pixels at an aspect ratio of 0.70-0.85 (ImageNet's
typical 500x375 is 0.75), a random horizontal flip, brightness, contrast, saturation and
hue changes, then JPEG quality 90 with 4:2:0 chroma subsampling (PIL's libjpeg). Files are
40-120 KB; a file outside that range is drawn again with the next random numbers. The
same seed gives the same bytes with the same PIL and libjpeg (the checksums say whether
they did).
"""

import argparse
import hashlib
import io
import os
import random
import sys

from PIL import Image, ImageEnhance

SOURCE = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"


def view(src: Image.Image, rng: random.Random) -> Image.Image:
    w, h = src.size
    area = rng.uniform(0.35, 1.0) * w * h
    aspect = rng.uniform(0.70, 0.85)  # height / width of the output
    cw = min(w, int(round((area / aspect) ** 0.5)))
    ch = min(h, int(round(cw * aspect)))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    img = src.crop((x, y, x + cw, y + ch))
    width = rng.randint(400, 560)
    img = img.resize((width, int(round(width * aspect))), Image.BICUBIC)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.7, 1.3))
    img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.7, 1.3))
    img = ImageEnhance.Color(img).enhance(rng.uniform(0.5, 1.5))
    hsv = img.convert("HSV")
    hue, sat, val = hsv.split()
    shift = rng.randint(0, 255)
    hue = hue.point(lambda v: (v + shift) % 256)
    return Image.merge("HSV", (hue, sat, val)).convert("RGB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=2048)
    p.add_argument("--seed", type=int, default=2023)
    p.add_argument("--source", default=SOURCE)
    a = p.parse_args()
    if not os.path.exists(a.source):
        sys.exit(f"make_photos: {a.source} missing (apt-get install python-matplotlib-data; "
                 "scripts/bootstrap.sh --bench-deps installs it)")
    src = Image.open(a.source).convert("RGB")
    rng = random.Random(a.seed)
    sums, sizes = [], []
    for i in range(a.count):
        while True:
            buf = io.BytesIO()
            view(src, rng).save(buf, "JPEG", quality=90, subsampling=2)
            data = buf.getvalue()
            if 40_000 <= len(data) <= 120_000:
                break
        rel = os.path.join(f"class_{i % 10}", f"photo_{i:05d}.jpg")
        os.makedirs(os.path.join(a.out, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(a.out, rel), "wb") as f:
            f.write(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {rel}\n")
        sizes.append(len(data))
    with open(os.path.join(a.out, "SHA256SUMS"), "w") as f:
        f.writelines(sums)
    sizes.sort()
    print(f"make_photos: {a.count} JPEGs in {a.out}, {sizes[0]}-{sizes[-1]} bytes "
          f"(median {sizes[len(sizes) // 2]}), seed {a.seed}", file=sys.stderr)


if __name__ == "__main__":
    main()
