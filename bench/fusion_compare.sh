#!/usr/bin/env bash
# Map-and-batch fusion, measured side by side in one run.
#
#   bench/fusion_compare.sh [--baseline BIN] [--build DIR] [--out DIR] [--jpeg-images N]
#                           [--epochs E] [--rounds R] [--threads "0 1 2"]
#
# The work: bench/dataloader_compare.sh's JPEG workload (N Fashion-MNIST images resized
# to 256x256 RGB JPEG q90 in 4 tar shards -> decode_augment: random resized crop 224, flip,
# normalize to float CHW -> batch 128 [-> prefetch 4]), with 0 (all inline), 1 and 2 map
# threads. Each round runs, back to back for each thread count:
#   fused     build/bin/dataloader_bench (the build fuses map and batch);
#   unfused   the same binary with --fusion off (every row copied by the batch);
#   baseline  BIN, another dataloader_bench (say the previous commit's), when given.
# Reported: the best epoch's images/s of each (dataloader_bench's rule), the ratios to
# "fused" per round and their median over rounds, and peak RSS from /usr/bin/time -v.
# Writes OUT/fusion_compare.json.
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/fusion_runs --as runs`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
BASELINE=""
JPEG_IMAGES=1024
EPOCHS=3
ROUNDS=3
THREADS="0 1 2"
while [[ $# -gt 0 ]]; do
  case $1 in
    --baseline) BASELINE=$(realpath "$2"); shift 2 ;;
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --jpeg-images) JPEG_IMAGES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "fusion_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"
FM=/usr/share/datasets/fashion-mnist
DATA=$OUT/dataloader_data
RUNS=$OUT/fusion_runs
DE=$BUILD/bin/dataecho
BENCH=$BUILD/bin/dataloader_bench
for f in "$DE" "$BENCH" /usr/bin/time; do
  [[ -x $f ]] || { echo "fusion_compare: $f missing (scripts/bootstrap.sh builds and installs it)" >&2; exit 1; }
done
mkdir -p "$DATA" "$RUNS"
prepare jpeg "$JPEG_IMAGES" --resize 256 --encode jpeg --quality 90 --channels 3
sync

variants="fused unfused"
[[ -n $BASELINE ]] && variants="$variants baseline"
for round in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    spec "$RUNS/jpeg-t$t.json" "$DATA/jpeg_tar" jpg decode_augment "$JPEG_ARGS" "$t"
    for v in $variants; do
      bin=$BENCH; extra=()
      [[ $v == unfused ]] && extra=(--fusion off)
      [[ $v == baseline ]] && bin=$BASELINE
      name="r$round-t$t-$v"
      log "$name"
      /usr/bin/time -v -o "$RUNS/$name.time" "$bin" pipeline --spec "$RUNS/jpeg-t$t.json" \
        --epochs "$EPOCHS" "${extra[@]}" > "$RUNS/$name.json"
    done
  done
done

/usr/bin/python3 - "$RUNS" "$ROUNDS" "$THREADS" "$variants" "$OUT/fusion_compare.json" <<'PY'
import json, re, statistics, sys
runs, rounds, threads, variants, out = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5]
def rss(name):
    text = open(f"{runs}/{name}.time").read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
result = {"rounds": rounds, "threads": {}}
print(f"{'threads':>7} {'variant':>9} {'images/s (per round)':>28} {'vs fused (median)':>18} {'peak RSS MiB':>13}")
for t in threads:
    rows = {}
    for v in variants:
        rate = [json.load(open(f"{runs}/r{r}-t{t}-{v}.json"))["images_per_s"] for r in range(1, rounds + 1)]
        mem = [rss(f"r{r}-t{t}-{v}") for r in range(1, rounds + 1)]
        rows[v] = {"images_per_s": rate, "peak_rss_mib": mem}
    for v in variants:
        ratio = [a / b for a, b in zip(rows[v]["images_per_s"], rows["fused"]["images_per_s"])]
        rows[v]["ratio_to_fused"] = ratio
        rows[v]["median_ratio_to_fused"] = statistics.median(ratio)
        print(f"{t:>7} {v:>9} {' '.join(f'{x:.0f}' for x in rows[v]['images_per_s']):>28} "
              f"{statistics.median(ratio):>18.3f} {max(rows[v]['peak_rss_mib']):>13.0f}")
    result["threads"][t] = rows
json.dump(result, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
