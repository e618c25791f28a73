#!/usr/bin/env bash
# Elastic order against file sharding: the photo pipeline's throughput on two ranks.
#
#   bench/elastic_compare.sh [--build DIR] [--out DIR] [--photos N] [--epochs E] [--rounds R]
#                            [--lanes K]
#
# The work: bench/dataloader_compare.sh's photo workload (N photographic JPEGs in 4 tar
# shards -> decode_augment: random resized crop 224, flip, normalize -> batch -> prefetch 4),
# E passes (repeat), as two rank processes of `dataecho pipe` run at once:
#   files    a shard stage first (whole files: 2 shards per rank), batch 128 per rank;
#   elastic  --world-size 2 --rank R --lanes K (ops/elastic.h), global batch 256.
# Rounds alternate the order (files first, then elastic first, ...). Reported per round and
# as the median over rounds: the summed images/s of the two ranks (each rank's rows over
# its own wall time) and the CPU seconds (user + sys) per 1,000 images, which other load
# on the machine moves less than the rate; the ratios elastic/files and files/elastic.
# Uses OUT/dataloader_data/photo_tar when it exists (whatever made it), else makes it
# (bench/dataloader_lib.sh's prepare_photos). Writes OUT/elastic_compare.json.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
PHOTOS=2048
EPOCHS=3
ROUNDS=3
LANES=12
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --photos) PHOTOS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --lanes) LANES=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "elastic_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"
DATA=$OUT/dataloader_data
RUNS=$OUT/elastic_runs
DE=$BUILD/bin/dataecho
[[ -x $DE && -x /usr/bin/time ]] || { echo "elastic_compare: $DE or /usr/bin/time missing" >&2; exit 1; }
mkdir -p "$DATA" "$RUNS"
if [[ -d $DATA/photo_tar ]]; then log "data photo: kept ($(cat "$DATA/photo.stamp" 2>/dev/null))"
else prepare_photos "$PHOTOS"; fi

# photo_spec OUT BATCH [SHARD-INDEX]: the pipeline, E passes, with a shard stage first when
# a shard index is given.
photo_spec() {
  local shard=""
  [[ $# -gt 2 ]] && shard="{\"op\": \"shard\", \"num_shards\": 2, \"index\": $3},"
  cat > "$1" <<JSON
{"seed": 7, "source": {"kind": "tar", "uri": "$DATA/photo_tar/train-*.tar", "fields": {"image": "jpg", "label": "cls"}},
 "stages": [$shard {"op": "repeat", "count": $EPOCHS},
   {"op": "map", "fn": "decode_augment", "args": $JPEG_ARGS, "parallelism": 1},
   {"op": "batch", "size": $2}, {"op": "prefetch", "buffer": 4}]}
JSON
}
photo_spec "$RUNS/files0.json" 128 0
photo_spec "$RUNS/files1.json" 128 1
photo_spec "$RUNS/elastic.json" 256

# run NAME MODE: both ranks at once; RUNS/NAME-rR.jsonl (the batches) and .time.
run() {
  log "$1"
  for r in 0 1; do
    local cmd=("$DE" pipe "$RUNS/files$r.json")
    [[ $2 == elastic ]] && cmd=("$DE" pipe "$RUNS/elastic.json" --world-size 2 --rank "$r" --lanes "$LANES")
    /usr/bin/time -f "%e %U %S" -o "$RUNS/$1-r$r.time" "${cmd[@]}" > "$RUNS/$1-r$r.jsonl" &
  done
  wait
}
for round in $(seq 1 "$ROUNDS"); do
  order="files elastic"
  (( round % 2 == 0 )) && order="elastic files"
  for mode in $order; do run "round$round-$mode" "$mode"; done
done

/usr/bin/python3 - "$RUNS" "$ROUNDS" "$OUT/elastic_compare.json" <<'PY'
import json, statistics, sys
runs, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def measure(name):
    rate, cpu, rows = 0.0, 0.0, 0
    for r in (0, 1):
        n = sum(len(json.loads(line)["ids"]) for line in open(f"{runs}/{name}-r{r}.jsonl"))
        wall, user, system = map(float, open(f"{runs}/{name}-r{r}.time").read().split()[-3:])
        rate += n / wall
        cpu += user + system
        rows += n
    return {"images_per_s": rate, "cpu_s_per_1000": 1000 * cpu / rows, "images": rows}
result = {m: [measure(f"round{k}-{m}") for k in range(1, rounds + 1)] for m in ("files", "elastic")}
for m in ("files", "elastic"):
    for key in ("images_per_s", "cpu_s_per_1000"):
        result[f"{m}_median_{key}"] = statistics.median(x[key] for x in result[m])
result["elastic_over_files"] = result["elastic_median_images_per_s"] / result["files_median_images_per_s"]
result["files_over_elastic"] = 1 / result["elastic_over_files"]
result["cpu_elastic_over_files"] = result["elastic_median_cpu_s_per_1000"] / result["files_median_cpu_s_per_1000"]
for m in ("files", "elastic"):
    rates = " ".join(f"{x['images_per_s']:7.0f}" for x in result[m])
    cpus = " ".join(f"{x['cpu_s_per_1000']:5.2f}" for x in result[m])
    print(f"{m:>8}: images/s {rates}  (median {result[f'{m}_median_images_per_s']:.0f}); CPU s per 1000 {cpus}")
print(f"elastic/files {result['elastic_over_files']:.3f}, files/elastic {result['files_over_elastic']:.3f}, "
      f"CPU per image elastic/files {result['cpu_elastic_over_files']:.3f}")
json.dump(result, open(out, "w"), indent=1)
PY
