#!/usr/bin/env bash
# decode_augment with and without decoder_scale (docs/image.md), side by side.
#
#   bench/decoder_scale_compare.sh [--build DIR] [--out DIR] [--images N] [--rounds R]
#                                  [--window-seconds S]
#
# Workloads (made once in OUT/decoder_scale_data):
#   photo  N photographic JPEGs from bench/make_photos.py (400-560 px wide, quality 90),
#          the photo workload of bench/dataloader_compare.sh;
#   large  the same N photos upscaled 2x (bicubic, 800-1120 px wide), saved again at
#          quality 90: a stand-in for camera-sized images. Upscaled content has less fine
#          detail than a real photo of that size, so its entropy decoding, which scaling
#          does not shrink, is cheaper than a real one's: real large photos gain less.
# Each is a tar source -> map decode_augment (random resized crop 224, flip, ImageNet
# normalize; parallelism 1) -> batch 128 -> prefetch 4, measured by dataloader_bench
# (one window of at least S seconds, default 5) with decoder_scale false and true, each
# round in the other order, R rounds (default 3). Prints each run and the median ratio per workload;
# writes OUT/decoder_scale_compare.json.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
IMAGES=512
ROUNDS=3
WINDOW=5
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --images) IMAGES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --window-seconds) WINDOW=$2; shift 2 ;;
    *) sed -n '2,19p' "$0" >&2; exit 2 ;;
  esac
done
source "$ROOT/scripts/commit_state.sh"
cmake --build "$BUILD" --target dataecho_cli dataloader_bench >&2
DATA=$OUT/decoder_scale_data
RUNS=$OUT/decoder_scale_runs
mkdir -p "$DATA" "$RUNS"
if [[ ! -f $DATA/stamp || $(cat "$DATA/stamp") != "$IMAGES" ]]; then
  rm -rf "$DATA"/*
  /usr/bin/python3 "$ROOT/bench/make_photos.py" --out "$DATA/photo_dir" --count "$IMAGES" --seed 2023
  /usr/bin/python3 - "$DATA/photo_dir" "$DATA/large_dir" <<'PY'
import os, sys
from PIL import Image
src, dst = sys.argv[1], sys.argv[2]
for root, _, files in os.walk(src):
    for f in sorted(files):
        if f.endswith(".jpg"):
            im = Image.open(os.path.join(root, f)).convert("RGB")
            im = im.resize((im.width * 2, im.height * 2), Image.BICUBIC)
            os.makedirs(os.path.join(dst, os.path.relpath(root, src)), exist_ok=True)
            im.save(os.path.join(dst, os.path.relpath(root, src), f), quality=90)
PY
  for wl in photo large; do
    "$BUILD/bin/dataecho" convert --dir "$DATA/${wl}_dir" --to tar --out "$DATA/${wl}_tar" --name train --shards 2 >&2
  done
  echo "$IMAGES" > "$DATA/stamp"
fi
for wl in photo large; do
  for ds in false true; do
    cat > "$RUNS/${wl}_$ds.spec.json" <<JSON
{"seed": 7, "source": {"kind": "tar", "uri": "$DATA/${wl}_tar/train-*.tar", "fields": {"image": "jpg", "label": "cls"}},
 "stages": [{"op": "map", "fn": "decode_augment", "args": {"channels": 3, "random_resized_crop": 224, "flip": true,
             "normalize": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}, "decoder_scale": $ds}, "parallelism": 1},
            {"op": "batch", "size": 128}, {"op": "prefetch", "buffer": 4}]}
JSON
  done
done
rm -f "$RUNS"/r*.json
for round in $(seq 1 "$ROUNDS"); do
  order="false true"
  (( round % 2 == 0 )) && order="true false"  # neither side always runs first
  for wl in photo large; do
    for ds in $order; do
      "$BUILD/bin/dataloader_bench" pipeline --spec "$RUNS/${wl}_$ds.spec.json" --epochs 1 \
        --window-seconds "$WINDOW" --json "$RUNS/r${round}_${wl}_$ds.json" 2>/dev/null >/dev/null
      echo "round $round $wl decoder_scale=$ds: $(grep -o '"images_per_s": *[0-9.]*' "$RUNS/r${round}_${wl}_$ds.json" | grep -o '[0-9.]*$') images/s"
    done
  done
done
COMMIT=$(commit_state "$ROOT") /usr/bin/python3 - "$RUNS" "$ROUNDS" "$OUT/decoder_scale_compare.json" <<'PY'
import json, os, statistics, sys
runs, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
result = {"commit": os.environ["COMMIT"], "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg(), "workloads": {}}
for wl in ("photo", "large"):
    rate = {ds: [json.load(open(f"{runs}/r{r}_{wl}_{ds}.json"))["images_per_s"] for r in range(1, rounds + 1)]
            for ds in ("false", "true")}
    ratios = [t / f for f, t in zip(rate["false"], rate["true"])]
    result["workloads"][wl] = {"exact_images_per_s": rate["false"], "decoder_scale_images_per_s": rate["true"],
                               "ratio_rounds": ratios, "ratio_median": statistics.median(ratios)}
    print(f"{wl}: decoder_scale / exact, median of {rounds} rounds: {statistics.median(ratios):.2f}x "
          f"(rounds {' '.join(f'{x:.2f}' for x in ratios)})")
json.dump(result, open(out, "w"), indent=1)
PY
