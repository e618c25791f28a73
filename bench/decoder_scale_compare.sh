#!/usr/bin/env bash
# decode_augment with and without decoder_scale (docs/image.md), side by side.
#
#   bench/decoder_scale_compare.sh [--build DIR] [--out DIR] [--images N] [--rounds R]
#                                  [--window-seconds S]
#
# Workloads (made once in OUT/decoder_scale_data, 4 tar shards each):
#   photo  N photographic JPEGs from bench/make_photos.py (400-560 px wide, quality 90),
#          the photo workload of bench/dataloader_compare.sh (bench/dataloader_lib.sh's
#          prepare_photos);
#   large  the same N photos upscaled 2x (bicubic, 800-1120 px wide), saved again at
#          quality 90: a stand-in for camera-sized images. Upscaled content has less fine
#          detail than a real photo of that size, so its entropy decoding, which scaling
#          does not shrink, is cheaper than a real one's: real large photos gain less.
# Each is dataloader_compare.sh's pipeline with 1 thread (bench/dataloader_lib.sh's spec:
# tar source -> map decode_augment with JPEG_ARGS, random resized crop 224, flip,
# ImageNet normalize -> batch 128 -> prefetch 4), measured by dataloader_bench
# (one window of at least S seconds, default 5) with decoder_scale false and true, each
# round in the other order, R rounds (default 3). Prints each run and the median ratio
# per workload; writes OUT/decoder_scale_compare.json.
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/decoder_scale_runs --as runs`).
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
    *) sed -n '2,23p' "$0" >&2; exit 2 ;;
  esac
done
source "$ROOT/scripts/commit_state.sh"
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"  # prepare_photos, spec, JPEG_ARGS, log
cmake --build "$BUILD" --target dataecho_cli dataloader_bench >&2
DE=$BUILD/bin/dataecho
DATA=$OUT/decoder_scale_data
RUNS=$OUT/decoder_scale_runs
mkdir -p "$DATA" "$RUNS"
prepare_photos "$IMAGES"  # DATA/photo_dir and DATA/photo_tar, as dataloader_compare.sh's
if [[ ! -f $DATA/large.stamp || $(cat "$DATA/large.stamp") != "$(cat "$DATA/photo.stamp")" ]]; then
  log "data large: the photos upscaled 2x"
  rm -rf "$DATA/large_dir" "$DATA/large_tar"
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
  "$DE" convert --dir "$DATA/large_dir" --to tar --out "$DATA/large_tar" --name train --shards 4 >&2
  cp "$DATA/photo.stamp" "$DATA/large.stamp"
fi
for wl in photo large; do
  for ds in false true; do
    spec "$RUNS/${wl}_$ds.spec.json" "$DATA/${wl}_tar" jpg decode_augment "${JPEG_ARGS%\}}, \"decoder_scale\": $ds}" 1
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
