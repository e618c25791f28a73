#!/usr/bin/env bash
# Remote shards kept on local disk (`cache_dir`, include/dataecho/io/shard_cache.h), measured:
#   1. the first pass over a throttled nginx (`dataecho serve --rate`), which fills the folder;
#   2. later passes through the same URLs and folder, against reading the folder's copies
#      as local files, in rounds of one run that alternate which side goes first (each read:
#      the list --repeat times, seconds long) (`dataecho bench read --records`: the
#      TFRecord framing walked over 4 connections, CRCs not checked: this measures the
#      transport and the cache, not the parser);
#   3. nginx's access log: how many times each shard was fetched (GET) and asked about
#      (HEAD, one per open of a cached shard: a changed shard is fetched again).
#
#   bench/cache_dir_compare.sh [--out DIR] [--rate 8m] [--rounds 5] [--shards 8] [--mb 16] [--repeat 160]
#
# Writes OUT/cache_dir/results.json and prints a table. Both sides read the same files
# through the page cache.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/out
RATE=8m
ROUNDS=5
SHARDS=8
MB=16
REPEAT=160
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --shards) SHARDS=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    *) echo "cache_dir_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
DE=$ROOT/build/bin/dataecho
[[ -x $DE ]] || { echo "cache_dir_compare: build first (scripts/bootstrap.sh)" >&2; exit 1; }
WORK=$OUT/cache_dir
rm -rf "$WORK"
mkdir -p "$WORK/shards" "$WORK/tmp"

# Shards of TFRecord framing around records of 1-64 KiB of random bytes (CRCs zero).
/usr/bin/python3 - "$WORK/shards" "$SHARDS" "$MB" <<'PY'
import os, random, struct, sys
out, shards, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
for s in range(shards):
    data = bytearray()
    while len(data) < mb << 20:
        rec = os.urandom(rng.randint(1 << 10, 64 << 10))
        data += struct.pack("<QI", len(rec), 0) + rec + b"\0\0\0\0"
    with open(f"{out}/train-{s}.tfrecord", "wb") as f:
        f.write(data)
PY

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TMPDIR=$WORK/tmp "$DE" serve "$WORK/shards" --port "$PORT" --rate "$RATE" --access-log >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
LOG=$(ls -d "$WORK"/tmp/dataecho-serve-*)/access.log
LAST=$((SHARDS - 1))
REMOTE="http://127.0.0.1:$PORT/train-{0..$LAST}.tfrecord"
CACHE=$WORK/folder
# The local side reads the cache's own copies as plain files: the same bytes in the same
# files, so that what differs is only what cache_dir does on each open (a HEAD request,
# the locks). (Files of the same bytes written differently read at up to 2x different
# speeds from the page cache on this machine: a shard written in one piece against the
# cache's 1 MiB writes.)
LOCAL="$CACHE/*.shard"

read_json() {  # NAME URI [ARGS...]: one `bench read` as JSON into WORK/NAME.json
  local name=$1 uri=$2
  shift 2
  "$DE" bench read "$uri" --records --json -k 4 "$@" >"$WORK/$name.json"
}
echo "first pass over nginx at $RATE/s per connection, filling $CACHE ..." >&2
read_json first "$REMOTE" --cache-dir "$CACHE"
read_json warm_local "$LOCAL" --repeat 1
for r in $(seq "$ROUNDS"); do  # the order alternates: odd rounds local first
  echo "round $r/$ROUNDS" >&2
  if ((r % 2)); then read_json "local_$r" "$LOCAL" --repeat "$REPEAT"; fi
  read_json "cached_$r" "$REMOTE" --cache-dir "$CACHE" --repeat "$REPEAT"
  if ((r % 2 == 0)); then read_json "local_$r" "$LOCAL" --repeat "$REPEAT"; fi
done

/usr/bin/python3 - "$WORK" "$ROUNDS" "$LOG" "$SHARDS" "$RATE" <<'PY'
import json, re, statistics, sys
work, rounds, log, shards, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
load = lambda n: json.load(open(f"{work}/{n}.json"))
first = load("first")
local = [load(f"local_{r}") for r in range(1, rounds + 1)]
cached = [load(f"cached_{r}") for r in range(1, rounds + 1)]
ratios = [c["records_per_s"] / l["records_per_s"] for l, c in zip(local, cached)]
gets, heads = {}, {}
for line in open(log):
    m = re.search(r'"(GET|HEAD) /(train-\d+\.tfrecord) ', line)
    if m:
        (gets if m.group(1) == "GET" else heads).setdefault(m.group(2), 0)
        (gets if m.group(1) == "GET" else heads)[m.group(2)] += 1
res = {
    "rate_per_connection": rate,
    "shards": shards,
    "first_pass": {k: first[k] for k in ("seconds", "mb_per_s", "records_per_s", "cache_misses")},
    "local_records_per_s": [l["records_per_s"] for l in local],
    "cached_records_per_s": [c["records_per_s"] for c in cached],
    "cached_over_local_per_round": ratios,
    "cached_over_local_median": statistics.median(ratios),
    "cached_counters": {k: v for k, v in cached[-1].items() if k.startswith("cache_")},
    "gets_per_shard": gets,
    "heads_per_shard": heads,
    "seconds_per_side_per_round": statistics.median([l["seconds"] for l in local]),
}
json.dump(res, open(f"{work}/results.json", "w"), indent=2)
print(f"first pass (nginx, {rate}/s per connection): {first['seconds']:.1f} s, {first['mb_per_s']:.1f} MB/s")
print("| round | local shards, records/s | cache_dir, records/s | cache_dir / local |")
print("|---|---|---|---|")
for r, (l, c, q) in enumerate(zip(local, cached, ratios), 1):
    print(f"| {r} | {l['records_per_s']:,.0f} | {c['records_per_s']:,.0f} | {q:.3f} |")
print(f"median cache_dir / local: {res['cached_over_local_median']:.3f}")
print(f"GETs per shard: {sorted(set(gets.values()))} (of {len(gets)} shards); HEADs per shard: {sorted(set(heads.values()))}")
PY
