#!/usr/bin/env bash
# The data service's overhead: the photo pipeline through one local worker against the
# same pipeline in one process, in one run.
#
#   bench/service_compare.sh [--build DIR] [--out DIR] [--photos N] [--epochs E] [--rounds R]
#                            [--threads "1 2"] [--sharding dynamic|off] [--lanes K] [--smoke]
#
# The work: bench/dataloader_compare.sh's photo workload (N photographic JPEGs, 400-560 px,
# in 4 tar shards; bench/dataloader_lib.sh's prepare_photos), E passes, batch 128, with T
# upstream threads for each T of --threads, as `dataecho pipe` on this machine:
#   inprocess  tar -> repeat E -> map decode_augment (random resized crop 224, flip,
#              normalize with ImageNet's mean and std to float32 CHW; parallelism T) ->
#              batch 128 -> prefetch 4, in one process (bench/elastic_compare.sh's pipeline);
#   service    `dataecho dispatcher` and one `dataecho worker --threads T` on 127.0.0.1,
#              started afresh for each round. The worker runs the upstream, tar -> map
#              decode_augment (crop 224 and flip only: uint8 HWC crops of 150,528 bytes;
#              parallelism T), and sends the crops over gRPC. The consumer, `dataecho pipe`
#              over a service source (sharding S, default "dynamic", K lanes, default 1: the
#              dispatcher cuts at least 4 pieces a lane, so 4 pieces of 512 photos for 2,048),
#              runs repeat E (each pass the job's next epoch) -> map normalize (the same mean
#              and std to float32 CHW, parallelism 1: in prefetch's thread) -> batch 128 ->
#              prefetch 4. A float batch of 128 crops is 77 MB; a quarter of that crosses
#              the socket.
# Rounds alternate the order (inprocess first, then service first, ...) for each T.
# bench/service_meter.py runs each consumer and times its batches. Reported per round and
# as medians over the rounds: each side's images/s (the images after the first batch over
# the time from it to the last: neither side pays for its start; the service side's
# dispatcher and worker start before its consumer), service/inprocess (target: >= 0.90
# with 1 thread; the median of the rounds' ratios), CPU milliseconds per image of each
# process over the same window (consumer, worker, dispatcher), the images over the
# consumer's whole run time, and the peak RSS of every process, the largest over the
# rounds (the consumer's from wait4's rusage, the dispatcher's and the worker's from
# /usr/bin/time -v: each one's maximum resident set). Uses OUT/dataloader_data/photo_tar when it exists (whatever made
# it), else makes it. Writes OUT/service_compare.json and a table (also in
# OUT/service_compare.txt); every run's files in OUT/service_runs.
# --smoke: 256 photos in OUT (default out/service_smoke), 4 passes, 1 round, 1 thread: a
# second or two a side, to check that the script works, not a measurement (options after
# it override these).
# Needs a build with the gRPC plugin (BUILD/libdataecho_grpc.so), /usr/bin/time, python3.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=""
PHOTOS=2048
EPOCHS=8
ROUNDS=3
THREADS="1 2"
SHARDING=dynamic
LANES=1
SMOKE=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --photos) PHOTOS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --sharding) SHARDING=$2; shift 2 ;;
    --lanes) LANES=$2; shift 2 ;;
    --smoke) SMOKE=1; PHOTOS=256; EPOCHS=4; ROUNDS=1; THREADS=1; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "service_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $OUT ]] || { OUT=$ROOT/out; [[ $SMOKE == 1 ]] && OUT=$ROOT/out/service_smoke; }
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"
# shellcheck source=service_lib.sh
source "$ROOT/bench/service_lib.sh"
DATA=$OUT/dataloader_data
RUNS=$OUT/service_runs
DE=$BUILD/bin/dataecho
[[ -x $DE && -x /usr/bin/time ]] || { echo "service_compare: $DE or /usr/bin/time missing" >&2; exit 1; }
[[ -f $BUILD/libdataecho_grpc.so ]] || { echo "service_compare: no $BUILD/libdataecho_grpc.so (a build without gRPC)" >&2; exit 1; }
export DATAECHO_GRPC_PLUGIN=${DATAECHO_GRPC_PLUGIN:-$BUILD/libdataecho_grpc.so}
rm -rf "$RUNS"
mkdir -p "$DATA" "$RUNS"
if [[ -d $DATA/photo_tar ]]; then log "data photo: kept ($(cat "$DATA/photo.stamp" 2>/dev/null))"
else prepare_photos "$PHOTOS"; fi
trap 'svc_stop worker dispatcher' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

MEAN_STD='"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]'
CROP_ARGS='{"channels": 3, "random_resized_crop": 224, "flip": true}'
TAR_SOURCE="{\"kind\": \"tar\", \"uri\": \"$DATA/photo_tar/train-*.tar\", \"fields\": {\"image\": \"jpg\", \"label\": \"cls\"}}"

# inprocess_spec OUT T: the whole pipeline in one process.
inprocess_spec() {
  cat >"$1" <<JSON
{"seed": 7, "source": $TAR_SOURCE,
 "stages": [{"op": "repeat", "count": $EPOCHS},
   {"op": "map", "fn": "decode_augment", "args": $JPEG_ARGS, "parallelism": $2},
   {"op": "batch", "size": 128}, {"op": "prefetch", "buffer": 4}]}
JSON
}

# service_spec OUT T: the upstream on the worker (SVC_DISPATCHER's), the rest here.
service_spec() {
  cat >"$1" <<JSON
{"seed": 7,
 "source": {"kind": "service", "dispatcher": "$SVC_DISPATCHER", "job": "photo",
   "sharding": "$SHARDING", "lanes": $LANES,
   "pipeline": {"seed": 7, "source": $TAR_SOURCE,
     "stages": [{"op": "map", "fn": "decode_augment", "args": $CROP_ARGS, "parallelism": $2}]}},
 "stages": [{"op": "repeat", "count": $EPOCHS},
   {"op": "map", "fn": "normalize", "args": {$MEAN_STD}, "parallelism": 1},
   {"op": "batch", "size": 128}, {"op": "prefetch", "buffer": 4}]}
JSON
}

# run_inprocess NAME T / run_service NAME T: one side's round; RUNS/NAME.json (the meter's),
# RUNS/NAME/ (the spec, the servers' logs and /usr/bin/time reports).
run_inprocess() {
  mkdir -p "$RUNS/$1"
  inprocess_spec "$RUNS/$1/spec.json" "$2"
  log "$1: dataecho pipe, $2 thread(s), in one process"
  /usr/bin/python3 "$ROOT/bench/service_meter.py" --out "$RUNS/$1.json" --label "$1" -- \
    "$DE" pipe "$RUNS/$1/spec.json"
}
run_service() {
  local dir=$RUNS/$1
  mkdir -p "$dir"
  svc_dispatcher "$dir" "" 127.0.0.1
  svc_worker worker "$dir" "" "$2"
  service_spec "$dir/spec.json" "$2"
  log "$1: dataecho pipe over the service (dispatcher $SVC_DISPATCHER, one worker, $2 thread(s))"
  local rc=0
  /usr/bin/python3 "$ROOT/bench/service_meter.py" --out "$RUNS/$1.json" --label "$1" \
    --pid "worker=${SVC_PID[worker]}" --pid "dispatcher=${SVC_PID[dispatcher]}" -- \
    "$DE" pipe "$dir/spec.json" || rc=$?
  svc_stop worker dispatcher
  return "$rc"
}

for t in $THREADS; do
  for round in $(seq 1 "$ROUNDS"); do
    order="inprocess service"
    ((round % 2 == 0)) && order="service inprocess"
    for side in $order; do "run_$side" "t$t-round$round-$side" "$t"; done
  done
done

/usr/bin/python3 - "$RUNS" "$OUT" "$ROUNDS" "$THREADS" "$(svc_git)" \
  "photos=$PHOTOS epochs=$EPOCHS sharding=$SHARDING lanes=$LANES smoke=$SMOKE" <<'PY'
import json, os, re, statistics, sys
runs, out, rounds, threads, commit, settings = sys.argv[1:7]
rounds, threads = int(rounds), threads.split()

def time_v(path):
    """Peak RSS (KiB) and CPU seconds from a /usr/bin/time -v report."""
    text = open(path).read()
    num = lambda key: float(re.search(re.escape(key) + r":\s*([0-9.]+)", text).group(1))
    return {"peak_rss_kib": int(num("Maximum resident set size (kbytes)")),
            "cpu_s": num("User time (seconds)") + num("System time (seconds)")}

def side(name, servers):
    m = json.load(open(f"{runs}/{name}.json"))
    w = m["window"]
    images = max(1, w["images"])
    procs = {"consumer": {"peak_rss_kib": m["consumer_peak_rss_kib"], "cpu_s": m["consumer_cpu_s"]}}
    for s in servers:
        procs[s] = time_v(f"{runs}/{name}/{s}.time")
    for p, v in procs.items():
        v["window_cpu_ms_per_image"] = 1000 * w["processes"][p]["cpu_s"] / images
    return {"images_per_s": w["images_per_s"], "whole_images_per_s": m["whole_images_per_s"],
            "images": m["images"], "window_s": w["seconds"], "first_batch_s": m["first_batch_s"],
            "loadavg_before": m["loadavg_before"], "exit_status": m["exit_status"],
            "cpu_ms_per_image": sum(v["window_cpu_ms_per_image"] for v in procs.values()),
            "processes": procs}

med = statistics.median
result = {"source": commit, "settings": settings, "rounds": rounds, "threads": {}}
lines = [f"service_compare ({commit}; {settings}), medians of {rounds} round(s):"]
for t in threads:
    rs = []
    for k in range(1, rounds + 1):
        r = {"inprocess": side(f"t{t}-round{k}-inprocess", []),
             "service": side(f"t{t}-round{k}-service", ["worker", "dispatcher"])}
        r["service_over_inprocess"] = r["service"]["images_per_s"] / r["inprocess"]["images_per_s"]
        rs.append(r)
    s = {"rounds": rs, "service_over_inprocess": med(r["service_over_inprocess"] for r in rs)}
    for name in ("inprocess", "service"):
        for key in ("images_per_s", "whole_images_per_s", "cpu_ms_per_image"):
            s[f"{name}_median_{key}"] = med(r[name][key] for r in rs)
        s[f"{name}_peak_rss_mib"] = {p: max(r[name]["processes"][p]["peak_rss_kib"] for r in rs) / 1024
                                     for p in rs[0][name]["processes"]}
        s[f"{name}_cpu_ms_per_image_by_process"] = {
            p: med(r[name]["processes"][p]["window_cpu_ms_per_image"] for r in rs)
            for p in rs[0][name]["processes"]}
    result["threads"][t] = s
    per = lambda key, which: " ".join(f"{r[which][key]:.0f}" for r in rs)
    lines.append(f"{t} thread(s): service/inprocess {s['service_over_inprocess']:.3f} (rounds "
                 + " ".join(f"{r['service_over_inprocess']:.3f}" for r in rs) + ")")
    for name in ("inprocess", "service"):
        cpu = ", ".join(f"{p} {v:.2f}" for p, v in s[f"{name}_cpu_ms_per_image_by_process"].items())
        rss = ", ".join(f"{p} {v:.0f}" for p, v in s[f"{name}_peak_rss_mib"].items())
        lines.append(f"  {name:>9}: {s[f'{name}_median_images_per_s']:6.0f} images/s (rounds {per('images_per_s', name)}; "
                     f"whole run {s[f'{name}_median_whole_images_per_s']:.0f}); CPU ms/image {cpu}; peak RSS MiB {rss}")
json.dump(result, open(f"{out}/service_compare.json", "w"), indent=1)
open(f"{out}/service_compare.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
