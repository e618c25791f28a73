#!/usr/bin/env bash
# decode_augment with dataecho's Huffman decoder (src/image/jpeg_huffman.h, the default)
# against libjpeg-turbo's own (DATAECHO_JPEG_HUFFMAN=libjpeg), side by side.
#
#   bench/jpeg_huffman_compare.sh [--build DIR] [--out DIR] [--rounds R] [--threads "1 2"]
#                                 [--window-seconds S] [--against DIR]
#
# With --against DIR, the other side is DIR's dataloader_bench (a build of another
# commit) with dataecho's decoder too: a before/after measurement of a change to the
# decoder, which names the sides "this" and "against" in the output.
#
# Workloads, those of bench/dataloader_compare.sh (bench/dataloader_lib.sh):
#   photo  512 photographic JPEGs, 400-560 px wide, quality 90 (prepare_photos);
#   jpeg   1,024 Fashion-MNIST images upscaled to 256x256 RGB JPEGs, quality 90 (prepare).
# Each runs dataloader_compare.sh's pipeline (tar source -> map decode_augment with
# JPEG_ARGS: random resized crop 224, flip, ImageNet normalize -> batch 128 [-> prefetch
# 4]) under dataloader_bench (one window of at least S seconds, default 5) with each
# decoder, each round in the other order, R rounds (default 3), for each thread count.
# The pixels are the same bits either way (tests/image/jpeg_huffman_test.cc). Prints
# each run and the median ratio; writes OUT/jpeg_huffman_compare.json with every run's
# images/s and peak PSS.
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/jpeg_huffman_runs --as runs`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
ROUNDS=3
THREADS="1 2"
WINDOW=5
AGAINST=
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --window-seconds) WINDOW=$2; shift 2 ;;
    --against) AGAINST=$(realpath -m "$2"); shift 2 ;;
    *) sed -n '2,24p' "$0" >&2; exit 2 ;;
  esac
done
source "$ROOT/scripts/commit_state.sh"
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"  # prepare, prepare_photos, spec, JPEG_ARGS, log
cmake --build "$BUILD" --target dataecho_cli dataloader_bench >&2
DE=$BUILD/bin/dataecho
FM=/usr/share/datasets/fashion-mnist
DATA=$OUT/jpeg_huffman_data
RUNS=$OUT/jpeg_huffman_runs
mkdir -p "$DATA" "$RUNS"
prepare_photos 512
prepare jpeg 1024 --resize 256 --encode jpeg --quality 90 --channels 3
rm -f "$RUNS"/r*.json
for t in $THREADS; do
  for wl in photo jpeg; do spec "$RUNS/${wl}_t$t.spec.json" "$DATA/${wl}_tar" jpg decode_augment "$JPEG_ARGS" "$t"; done
done
A=dataecho B=libjpeg
[[ -n $AGAINST ]] && A=this B=against
[[ -z $AGAINST || -x $AGAINST/bin/dataloader_bench ]] || { echo "no $AGAINST/bin/dataloader_bench" >&2; exit 1; }
for round in $(seq 1 "$ROUNDS"); do
  order="$A $B"
  (( round % 2 == 0 )) && order="$B $A"  # neither side always runs first
  for t in $THREADS; do
    for wl in photo jpeg; do
      for dec in $order; do
        env_dec=()
        bench=$BUILD/bin/dataloader_bench
        [[ $dec == libjpeg ]] && env_dec=(DATAECHO_JPEG_HUFFMAN=libjpeg)
        [[ $dec == against ]] && bench=$AGAINST/bin/dataloader_bench
        env "${env_dec[@]}" "$bench" pipeline --spec "$RUNS/${wl}_t$t.spec.json" \
          --epochs 1 --window-seconds "$WINDOW" --json "$RUNS/r${round}_${wl}_t${t}_$dec.json" >/dev/null 2>&1
        echo "round $round, $wl, $t thread(s), $dec: $(grep -o '"images_per_s": *[0-9.]*' \
          "$RUNS/r${round}_${wl}_t${t}_$dec.json" | grep -o '[0-9.]*$') images/s"
      done
    done
  done
done
COMMIT=$(commit_state "$ROOT") AGAINST_COMMIT=$([[ -n $AGAINST ]] && git -C "$AGAINST" rev-parse --short HEAD 2>/dev/null || true) \
  /usr/bin/python3 - "$RUNS" "$ROUNDS" "$THREADS" "$OUT/jpeg_huffman_compare.json" "$A" "$B" <<'PY'
import json, os, statistics, sys
runs, rounds, threads, out = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
A, B = sys.argv[5], sys.argv[6]
result = {"commit": os.environ["COMMIT"], "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg(),
          "sides": [A, B], "runs": {}}
if os.environ.get("AGAINST_COMMIT"):
    result["against_commit"] = os.environ["AGAINST_COMMIT"]
for t in threads:
    for wl in ("photo", "jpeg"):
        got = {d: [json.load(open(f"{runs}/r{r}_{wl}_t{t}_{d}.json")) for r in range(1, rounds + 1)]
               for d in (A, B)}
        ratios = [a["images_per_s"] / b["images_per_s"] for a, b in zip(got[A], got[B])]
        result["runs"][f"{wl}_t{t}"] = {
            **{f"{d}_images_per_s": [j["images_per_s"] for j in got[d]] for d in got},
            **{f"{d}_peak_pss_kib": [j["peak_pss_kib"] for j in got[d]] for d in got},
            "ratio_rounds": ratios, "ratio_median": statistics.median(ratios)}
        print(f"{wl}, {t} thread(s): {A} / {B}, median of {rounds} rounds: "
              f"{statistics.median(ratios):.3f}x (rounds {' '.join(f'{x:.3f}' for x in ratios)})")
json.dump(result, open(out, "w"), indent=1)
PY
