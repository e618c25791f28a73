#!/usr/bin/env bash
# HTTP read throughput, side by side, in one run:
#  (a) throttled: nginx limited to RATE per connection, CONNS connections:
#      dataecho bench read should reach >= 90% of CONNS x RATE;
#  (b) unthrottled loopback: dataecho bench read vs a plain curl download of the same
#      files over the same number of connections (CONNS curl processes, each fetching its
#      share of the files over one keep-alive connection): should be >= 70% of curl.
# Starts nginx itself (through `dataecho serve`), makes the files, prints the figures and
# ratios, stops nginx. Usage:
#   bench/http_read_bench.sh [DATAECHO_BIN]    (env: RATE=1m CONNS=4 FILES=8 FILE_MIB=8
#                                               FAST_FILE_MIB=64 ROUNDS=3)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-${DATAECHO_BIN:-$(ls -t "$here"/build*/bin/dataecho 2>/dev/null | head -1)}}"
[[ -x "$bin" ]] || { echo "no dataecho binary (give it as the first argument)" >&2; exit 1; }
RATE="${RATE:-1m}"; CONNS="${CONNS:-4}"; FILES="${FILES:-8}"; FILE_MIB="${FILE_MIB:-8}"
FAST_FILE_MIB="${FAST_FILE_MIB:-64}"; ROUNDS="${ROUNDS:-3}"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# TFRecord framing (u64 length, u32 crc, data, u32 crc; CRCs zero: bench read walks the
# framing but does not check CRCs) of 64 KiB records, so that records/s means something.
make_files() {  # dir count mib
  mkdir -p "$1"
  python3 - "$1" "$2" "$3" <<'PY'
import os, struct, sys
d, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rec = 64 << 10
for i in range(n):
    with open(os.path.join(d, "shard-%05d.tfrecord" % i), "wb") as f:
        left = mib << 20
        while left > 16:
            size = min(rec, left - 16)
            f.write(struct.pack("<QI", size, 0) + os.urandom(size) + b"\0\0\0\0")
            left -= size + 16
PY
}

serve() {  # dir port [serve options...]: starts dataecho serve, waits for its URL
  local dir="$1" port="$2"; shift 2
  "$bin" serve "$dir" --port "$port" "$@" >"$work/serve-$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^http://' "$work/serve-$port.log" && return 0; sleep 0.1; done
  cat "$work/serve-$port.log" >&2; exit 1
}

urls() {  # port count
  for i in $(seq 0 $(($2 - 1))); do printf 'http://127.0.0.1:%s/shard-%05d.tfrecord\n' "$1" "$i"; done
}

json_field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }

make_files "$work/slow" "$FILES" "$FILE_MIB"
make_files "$work/fast" "$FILES" "$FAST_FILE_MIB"
slow_port="$(free_port)"; serve "$work/slow" "$slow_port" --rate "$RATE" --connections "$CONNS"
fast_port="$(free_port)"; serve "$work/fast" "$fast_port" --workers 2

rate_bytes="$(python3 -c 'import sys; r=sys.argv[1]; u={"k":1<<10,"m":1<<20,"g":1<<30}; print(int(r[:-1])*u[r[-1].lower()] if r[-1].isalpha() else int(r))' "$RATE")"
target_mb="$(python3 -c "print($CONNS * $rate_bytes / 1e6)")"

echo "== (a) throttled: nginx limit_rate $RATE per connection, $CONNS connections, $FILES x $FILE_MIB MiB"
mapfile -t slow_urls < <(urls "$slow_port" "$FILES")
out="$("$bin" bench read --json --records -k "$CONNS" "${slow_urls[@]}")"
echo "dataecho bench read: $out"
mbs="$(echo "$out" | json_field mb_per_s)"
python3 -c "print('throttled: %.2f MB/s of k*X = %.2f MB/s -> %.1f%% (target >= 90%%)' % ($mbs, $target_mb, 100*$mbs/$target_mb))"

echo "== (b) unthrottled loopback: $FILES x $FAST_FILE_MIB MiB over $CONNS connections, best of $ROUNDS"
mapfile -t fast_urls < <(urls "$fast_port" "$FILES")
total_bytes=$((FILES * FAST_FILE_MIB * 1048576))
per_proc=$(( (FILES + CONNS - 1) / CONNS ))
best_curl=0; best_de=0
for r in $(seq "$ROUNDS"); do
  t0="$(date +%s.%N)"
  printf '%s\n' "${fast_urls[@]}" |
    xargs -P "$CONNS" -n "$per_proc" sh -c 'exec curl -sS --fail $(for u; do echo "-o /dev/null $u"; done)' sh
  t1="$(date +%s.%N)"
  c="$(python3 -c "print($total_bytes / 1e6 / ($t1 - $t0))")"
  out="$("$bin" bench read --json --records -k "$CONNS" "${fast_urls[@]}")"
  d="$(echo "$out" | json_field mb_per_s)"
  printf 'round %d: curl %.1f MB/s, dataecho %.1f MB/s (%s records/s)\n' "$r" "$c" "$d" \
    "$(echo "$out" | json_field records_per_s)"
  best_curl="$(python3 -c "print(max($best_curl, $c))")"
  best_de="$(python3 -c "print(max($best_de, $d))")"
done
python3 -c "print('unthrottled: dataecho %.1f MB/s vs curl %.1f MB/s -> %.1f%% (target >= 70%%)' % ($best_de, $best_curl, 100*$best_de/$best_curl))"
