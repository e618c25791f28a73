#!/usr/bin/env bash
# dataecho against boto3 over s3://, side by side on one S3 server run (the tests' server,
# tests/s3/server: @20minutes/s3rver on Node.js, loopback, signatures verified) and the
# same objects, with Debian's curl as the server's ceiling:
#   list   KEYS zero-byte keys in FOLDERS sub-prefixes, listed as one prefix in pages of
#          1000: bench/s3_bench list (expand_uris, s3_list_requests counted) against
#          boto3's list_objects_v2 paginator; also dataecho's brace pattern of the FOLDERS
#          prefixes, listed 8 at once.
#   small  PHOTOS photo JPEGs (bench/make_photos.py, ~50 KB) as the `files` source over
#          s3:// (a manifest of their URIs, so that no side lists: each does the same GETs;
#          bytes only, no decode) with reads_in_flight R, against boto3 get_object in a
#          ThreadPoolExecutor of R threads, and curl --parallel-max R.
#   large  one LARGE_MB MB TFRecord read by the tfrecord source (raw records) against
#          boto3's download_fileobj into a sink that keeps nothing, and one curl GET.
#
#   bench/s3_compare.sh [--out DIR] [--rounds N] [--keys N] [--folders N] [--photos N]
#                       [--large-mb N] [--reads-in-flight "8 32"] [--results DIR]
#
# OUT (default out/s3_bench) keeps the server's folder and the uploads, so a rerun with the
# same sizes uploads nothing (the stamps OUT/*.stamp record the sizes; other sizes need
# another --out). Rounds alternate the sides' order (odd: dataecho, boto3, curl; even:
# the reverse). Each run's load average (1 min) is taken before it, its peak RSS and CPU
# seconds (user + system: the client's, not the server's) from /usr/bin/time -v. The
# medians over the rounds are printed as a table and written, with every run, to
# RESULTS/s3_compare.json (RESULTS default: OUT). Seconds: dataecho's from before the
# pipeline's build (its listing included) to its last element; boto3's from after its
# import and client (left out, reported as startup_s); curl's the whole process.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/out/s3_bench
ROUNDS=3
KEYS=100000
FOLDERS=100
PHOTOS=2048
LARGE_MB=64
READS="8 32"
RESULTS=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --folders) FOLDERS=$2; shift 2 ;;
    --photos) PHOTOS=$2; shift 2 ;;
    --large-mb) LARGE_MB=$2; shift 2 ;;
    --reads-in-flight) READS=$2; shift 2 ;;
    --results) RESULTS=$(realpath -m "$2"); shift 2 ;;
    *) echo "s3_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
RESULTS=${RESULTS:-$OUT}
BENCH=$ROOT/build/bin/s3_bench
SIDE=(/usr/bin/python3 "$ROOT/bench/s3_side.py")
SERVER_DIR=$ROOT/tests/s3/server
[[ -x $BENCH ]] || { echo "s3_compare: no $BENCH (ninja -C build s3_bench)" >&2; exit 1; }
[[ -d $SERVER_DIR/node_modules/@20minutes/s3rver ]] || {
  echo "s3_compare: $SERVER_DIR/node_modules has no @20minutes/s3rver: run scripts/bootstrap.sh" >&2; exit 1; }
mkdir -p "$OUT/store" "$OUT/runs" "$RESULTS"
export AWS_ACCESS_KEY_ID=AKIADATAECHOBENCH001
export AWS_SECRET_ACCESS_KEY=dataecho/bench+secret/s3rver0123456789ab
export AWS_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL

# The server, once, on a free port.
node --openssl-legacy-provider "$SERVER_DIR/start.js" --directory "$OUT/store" --port 0 \
  --access-key-id "$AWS_ACCESS_KEY_ID" --secret-access-key "$AWS_SECRET_ACCESS_KEY" \
  > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening' "$OUT/server.log" && break; sleep 0.1; done
ENDPOINT=http://$(sed -n 's/^listening //p' "$OUT/server.log")
[[ $ENDPOINT != http:// ]] || { echo "s3_compare: the server did not start:" >&2; cat "$OUT/server.log" >&2; exit 1; }
export AWS_ENDPOINT_URL_S3=$ENDPOINT

# Uploads, once per OUT: each part's stamp holds its size.
stamped() {  # NAME SIZE: whether NAME was uploaded at SIZE (another size is an error)
  [[ -f $OUT/$1.stamp ]] || return 1
  [[ $(cat "$OUT/$1.stamp") == "$2" ]] && return 0
  echo "s3_compare: $OUT holds $1 at $(cat "$OUT/$1.stamp"), not $2: use another --out" >&2; exit 1
}
if ! stamped keys "$KEYS $FOLDERS"; then
  echo "s3_compare: uploading $KEYS keys in $FOLDERS prefixes (boto3, 16 threads)" >&2
  "${SIDE[@]}" --endpoint "$ENDPOINT" upload-keys keys keys --count "$KEYS" --folders "$FOLDERS" >&2
  echo "$KEYS $FOLDERS" > "$OUT/keys.stamp"
fi
if ! stamped photos "$PHOTOS"; then
  rm -rf "$OUT/photos"
  /usr/bin/python3 "$ROOT/bench/make_photos.py" --out "$OUT/photos" --count "$PHOTOS" >&2
  rm -f "$OUT/photos/SHA256SUMS"
  "${SIDE[@]}" --endpoint "$ENDPOINT" upload-dir photos "$OUT/photos" >&2
  echo "$PHOTOS" > "$OUT/photos.stamp"
fi
if ! stamped large "$LARGE_MB"; then
  # LARGE_MB lines of 1 MiB (base64 of random bytes), one TFRecord record each.
  /usr/bin/python3 -c 'import base64, os, sys
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(base64.b64encode(os.urandom(786420))[: (1 << 20) - 64] + b"\n")' \
    "$OUT/large.txt" "$LARGE_MB"
  "$ROOT/build/bin/dataecho" convert --text "$OUT/large.txt" --to tfrecord --out "$OUT/large" --name big >&2
  rm -f "$OUT/large.txt"
  "${SIDE[@]}" --endpoint "$ENDPOINT" upload-dir large "$OUT/large" >&2
  echo "$LARGE_MB" > "$OUT/large.stamp"
fi
LARGE_KEY=$(cd "$OUT/large" && ls)
LARGE_BYTES=$(stat -c %s "$OUT/large/$LARGE_KEY")

# The photos' URIs (dataecho's and boto3's manifest) and curl's URL lists.
(cd "$OUT/photos" && find . -name '*.jpg' | LC_ALL=C sort | sed 's#^\./#s3://photos/#') > "$OUT/photos.manifest"
sed "s#^s3://\(.*\)#url = \"$ENDPOINT/\1\"\noutput = \"/dev/null\"#" "$OUT/photos.manifest" > "$OUT/photos.curl"
printf 'url = "%s/large/%s"\noutput = "/dev/null"\n' "$ENDPOINT" "$LARGE_KEY" > "$OUT/large.curl"

spec() {  # FILE SOURCE-JSON: a pipeline of the source alone
  printf '{"seed": 1, "source": %s, "stages": []}\n' "$2" > "$1"
}
spec "$OUT/small.json" "{\"kind\": \"files\", \"uri\": \"@$OUT/photos.manifest\", \"reads_in_flight\": R}"
spec "$OUT/large.json" "{\"kind\": \"tfrecord\", \"uri\": \"s3://large/$LARGE_KEY\", \"raw\": true}"

RUNS=$OUT/runs/runs.jsonl
: > "$RUNS"
# measure ROUND PART SIDE WIDTH COMMAND...: runs it under /usr/bin/time -v; appends its JSON
# line (for curl, which prints none: its wall seconds) with the load before it and its RSS.
measure() {
  local round=$1 part=$2 side=$3 width=$4; shift 4
  local load name=$OUT/runs/$part-$side-$width-$round
  load=$(cut -d' ' -f1 /proc/loadavg)
  local start end
  start=$(date +%s.%N)
  /usr/bin/time -v -o "$name.time" "$@" > "$name.out"
  end=$(date +%s.%N)
  /usr/bin/python3 - "$name" "$round" "$part" "$side" "$width" "$load" "$start" "$end" >> "$RUNS" <<'PY'
import json, re, sys
name, rnd, part, side, width, load, start, end = sys.argv[1:]
text = open(name + ".out").read().strip()
r = json.loads(text.splitlines()[-1]) if text else {}
time_v = open(name + ".time").read()
r.update(round=int(rnd), part=part, side=side, width=int(width), load1=float(load),
         wall_s=float(end) - float(start),
         rss_kb=int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v).group(1)),
         cpu_s=sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", time_v).group(1))
                   for k in ("User", "System")))
r.setdefault("seconds", r["wall_s"])
print(json.dumps(r))
PY
}
# curl: signed as dataecho signs (SigV4 and the empty body's hash), bodies thrown away.
CURL=(curl -s -S --no-progress-meter --fail -Z --aws-sigv4 aws:amz:us-east-1:s3 -u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
      -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
run_side() {  # ROUND SIDE
  local r=$1 side=$2 w
  case $side in
    dataecho)
      measure "$r" list dataecho 1 "$BENCH" list s3://keys/keys/ --max-keys 1000
      measure "$r" list_braces dataecho 8 "$BENCH" list "s3://keys/keys/{000..$(printf %03d $((FOLDERS - 1)))}/" \
        --max-keys 1000 --list-parallelism 8
      for w in $READS; do
        sed "s/\"reads_in_flight\": R/\"reads_in_flight\": $w/" "$OUT/small.json" > "$OUT/small-$w.json"
        measure "$r" small dataecho "$w" "$BENCH" read "$OUT/small-$w.json"
      done
      measure "$r" large dataecho 1 "$BENCH" read "$OUT/large.json" ;;
    boto3)
      measure "$r" list boto3 1 "${SIDE[@]}" --endpoint "$ENDPOINT" list keys keys/
      for w in $READS; do
        measure "$r" small boto3 "$w" "${SIDE[@]}" --endpoint "$ENDPOINT" get "$OUT/photos.manifest" --threads "$w"
      done
      measure "$r" large boto3 1 "${SIDE[@]}" --endpoint "$ENDPOINT" download large "$LARGE_KEY" ;;
    curl)
      for w in $READS; do
        measure "$r" small curl "$w" "${CURL[@]}" --parallel-max "$w" -K "$OUT/photos.curl"
      done
      measure "$r" large curl 1 "${CURL[@]}" -K "$OUT/large.curl" ;;
  esac
}
for r in $(seq "$ROUNDS"); do
  sides=(dataecho boto3 curl)
  (( r % 2 == 0 )) && sides=(curl boto3 dataecho)
  echo "s3_compare: round $r of $ROUNDS: ${sides[*]} (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for s in "${sides[@]}"; do run_side "$r" "$s"; done
done

/usr/bin/python3 - "$RUNS" "$RESULTS/s3_compare.json" "$PHOTOS" "$LARGE_BYTES" "$KEYS" <<'PY'
import json, statistics, sys
runs_path, out_path, photos, large_bytes, keys = sys.argv[1:]
runs = [json.loads(line) for line in open(runs_path)]
groups = {}
for r in runs:
    groups.setdefault((r["part"], r["side"], r["width"]), []).append(r)
def med(rs, k):
    return statistics.median(r[k] for r in rs) if all(k in r for r in rs) else None
rows = []
for (part, side, width), rs in sorted(groups.items()):
    s = med(rs, "seconds")
    row = {"part": part, "side": side, "width": width, "rounds": len(rs), "seconds": s,
           "load1": med(rs, "load1"), "rss_mb": med(rs, "rss_kb") / 1024, "cpu_s": med(rs, "cpu_s"),
           "startup_s": med(rs, "startup_seconds")}
    if part.startswith("list"):
        row.update(keys=med(rs, "keys"), requests=med(rs, "requests"))
    elif part == "small":
        n = med(rs, "objects") or med(rs, "elements") or int(photos)
        row.update(objects=n, objects_per_s=n / s)
    else:
        row.update(mb_per_s=int(large_bytes) / s / 1e6)
    rows.append(row)
def pick(part, side, width):
    return next((r for r in rows if (r["part"], r["side"], r["width"]) == (part, side, width)), None)
targets = []
for r in rows:
    if r["side"] != "dataecho" or r["part"] not in ("small", "large"):
        continue
    b, c = pick(r["part"], "boto3", r["width"]), pick(r["part"], "curl", r["width"] if r["part"] == "small" else 1)
    if r["part"] == "small" and b and c:
        want = min(3 * b["objects_per_s"], 0.8 * c["objects_per_s"])
        targets.append({"part": "small", "width": r["width"], "dataecho": r["objects_per_s"],
                        "boto3": b["objects_per_s"], "curl": c["objects_per_s"], "target": want,
                        "met": r["objects_per_s"] >= want})
    elif r["part"] == "large" and b:
        targets.append({"part": "large", "dataecho": r["mb_per_s"], "boto3": b["mb_per_s"],
                        "curl": c["mb_per_s"] if c else None, "target": b["mb_per_s"],
                        "met": r["mb_per_s"] >= b["mb_per_s"]})
json.dump({"keys": int(keys), "photos": int(photos), "large_bytes": int(large_bytes),
           "medians": rows, "targets": targets, "runs": runs}, open(out_path, "w"), indent=1)
print(f"{'part':<12}{'side':<10}{'width':>6}{'seconds':>9}{'rate':>16}{'requests':>10}{'RSS MB':>8}"
      f"{'CPU s':>7}{'load':>6}")
for r in rows:
    rate = (f"{r['objects_per_s']:.0f} obj/s" if "objects_per_s" in r else
            f"{r['mb_per_s']:.0f} MB/s" if "mb_per_s" in r else f"{r['keys']:.0f} keys")
    req = f"{r['requests']:.0f}" if r.get("requests") is not None else ""
    print(f"{r['part']:<12}{r['side']:<10}{r['width']:>6}{r['seconds']:>9.3f}{rate:>16}{req:>10}"
          f"{r['rss_mb']:>8.0f}{r['cpu_s']:>7.2f}{r['load1']:>6.2f}")
for t in targets:
    if t["part"] == "small":
        print(f"target small R={t['width']}: dataecho {t['dataecho']:.0f} obj/s >= min(3 x boto3 "
              f"{t['boto3']:.0f}, 0.8 x curl {t['curl']:.0f}) = {t['target']:.0f}: "
              f"{'met' if t['met'] else 'MISSED'}")
    else:
        print(f"target large: dataecho {t['dataecho']:.0f} MB/s >= boto3 {t['boto3']:.0f} MB/s: "
              f"{'met' if t['met'] else 'MISSED'} (curl {t['curl'] or 0:.0f} MB/s)")
PY
