#!/usr/bin/env bash
# The photo workload over HTTP: the `files` source reading a CSV list of the photos one
# GET each (reads_in_flight R) against the tar source reading the same bytes as 4 shards,
# both from `dataecho serve` (nginx) on loopback, through the same decode_augment ->
# batch 128 pipeline as bench/dataloader_compare.sh (THREADS map threads, prefetch 4).
#
#   bench/files_http_compare.sh [--out DIR] [--threads T] [--reads-in-flight "8 32"] [--rounds N]
#
# Reads OUT/dataloader_data/photo_{dir,tar}, which bench/dataloader_compare.sh makes
# (--workloads photo). Prints one line per run: images/s (median window) and peak PSS.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/out
THREADS=2
READS="8 32"
ROUNDS=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reads-in-flight) READS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "files_http_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
DE=$ROOT/build/bin/dataecho
BENCH=$ROOT/build/bin/dataloader_bench
DATA=$OUT/dataloader_data
RUNS=$OUT/files_http_runs
[[ -d $DATA/photo_dir && -d $DATA/photo_tar ]] || {
  echo "files_http_compare: no $DATA/photo_{dir,tar} (run bench/dataloader_compare.sh --workloads photo first)" >&2; exit 1; }
mkdir -p "$RUNS"
DE="$DE" DATA="$DATA" source "$ROOT/bench/dataloader_lib.sh"

# The list: path relative to the list's URL, label = the class folder's index.
(cd "$DATA" && find photo_dir -mindepth 2 -type f -name '*.jpg' | LC_ALL=C sort | awk -F/ '
  { if (!($2 in cls)) cls[$2] = n++; print $0 "," cls[$2] }') > "$DATA/photo_list.csv"

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$DE" serve "$DATA" --port "$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
URL=http://127.0.0.1:$PORT

source_spec() {  # OUT SOURCE-JSON
  spec "$1" "-" jpg decode_augment "$JPEG_ARGS" "$THREADS"
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    s = json.load(f)
s["source"] = json.loads(sys.argv[2])
with open(sys.argv[1], "w") as f:
    json.dump(s, f, indent=2)
PY
}
run() {  # NAME SPEC
  /usr/bin/time -v -o "$RUNS/$1.time" "$BENCH" pipeline --spec "$2" --epochs 3 --window-seconds 5 > "$RUNS/$1.json"
  /usr/bin/python3 - "$1" "$RUNS/$1.json" <<'PY'
import json, sys
j = json.loads([l for l in open(sys.argv[2]).read().splitlines() if l.startswith("{")][-1])
print(f"{sys.argv[1]:28} {j['images_per_s']:7.0f} images/s  peak PSS {j.get('peak_pss_kib', 0) / 1024:5.0f} MiB")
PY
}
source_spec "$RUNS/tar.spec.json" "{\"kind\": \"tar\", \"uri\": \"$URL/photo_tar/train-{00000..00003}.tar\", \"fields\": {\"image\": \"jpg\", \"label\": \"cls\"}}"
for r in $(seq "$ROUNDS"); do
  run "r${r}_tar_http" "$RUNS/tar.spec.json"
  for reads in $READS; do
    source_spec "$RUNS/list_$reads.spec.json" "{\"kind\": \"files\", \"list\": \"$URL/photo_list.csv\", \"reads_in_flight\": $reads}"
    run "r${r}_list_http_reads$reads" "$RUNS/list_$reads.spec.json"
  done
done
