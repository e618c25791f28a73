#!/usr/bin/env bash
# Autotuning against the best hand-tuned setting, in one run.
#
#   bench/autotune_compare.sh [--build DIR] [--out DIR] [--seconds S] [--photo-images N]
#                             [--png-images N] [--workloads "photo png http sleep"]
#   bench/autotune_compare.sh --mode rebuild [--rounds R] [--seconds S] [--window-seconds W]
#                             [--photo-images N] [--build DIR] [--out DIR]
#
# --mode rebuild (the tuner's memory, include/dataecho/core/tuner_memory.h): the photo
# pipeline (below, without the repeat) built anew for every pass over its N images
# (2,048: about 0.6-0.9 s a pass), as a PyTorch loop does per epoch, measured by
# `dataloader_bench pipeline` in windows of W seconds (default 5; S / W windows, S
# default 20), beside the same pipeline as one long run (repeat, `autotune_bench` for S
# seconds). Five settings per round, R rounds (default 5), one after another in this
# order each round:
#   rebuild_hand   parallelism 2, prefetch 4 (the best hand setting on this machine);
#   rebuild_auto   "auto" for both, the tuner remembering across passes (the default);
#   rebuild_fresh  "auto", "autotune": {"remember": false}: each pass tunes from scratch;
#   long_hand, long_auto  the same settings, one pipeline for all S seconds.
# A rebuilt run's rate is its median window (dataloader_bench's images_per_s: a window's
# images after its first batch over the time to its last, every pass's build and start
# inside); its mean over all windows (the first, with the tuner's first warm-up, too) is
# reported beside it. A long run's is its rows/s over all S seconds, start-up and warm-up
# included. Writes OUT/autotune_rebuild.json (per round: each run and the ratios auto /
# hand, fresh / hand, long auto / long hand; over the rounds: their median and range)
# and prints the table; the load average before each run goes to OUT/loads.txt.
#
# Four workloads, each an endless pipeline (repeat) pulled for S seconds (default 30) by
# build/bin/autotune_bench with nothing else in the consumer's thread:
#   photo  photographic JPEGs (bench/make_photos.py, 4 local tar shards) -> repeat ->
#          map decode_augment (random resized crop 224, flip, normalize) -> batch 128 ->
#          prefetch;
#   png    Fashion-MNIST as PNG (4 local tar shards) -> repeat -> map decode_augment
#          (pad-crop 4, flip, normalize) -> batch 128 -> prefetch;
#   http   the photo shards served by `dataecho serve --rate 20m` (nginx on loopback,
#          20 MiB/s per connection) -> interleave cycle 4 -> repeat -> map decode_augment
#          -> batch 128 -> prefetch;
#   sleep  range -> map sleep 8 ms -> map burn (about 1 ms of CPU, inline on the
#          prefetch's thread) -> prefetch: the sleeping stage's best parallelism is about
#          8, where the burn becomes the bottleneck.
# Settings, each a separate run:
#   default  what a spec gets without settings: map parallelism 1, prefetch buffer 2
#            (interleave: one thread per shard, buffer_per_shard 2);
#   hand P   map parallelism P with prefetch buffer 4, P over a sweep (photo/png/http:
#            1 2 3 4; sleep: 1 2 4 8 12 16);
#   auto     map "parallelism": "auto", prefetch "buffer": "auto" (interleave
#            "parallelism": "auto"), default budgets (all cores, 1/8 of the memory).
# The rate of a run is its rows/s over all S seconds, start-up and the tuner's 10 s
# warm-up included; the settled rate (second half) is reported beside it. Peak RSS comes
# from /usr/bin/time -v. Writes OUT/autotune_compare.json and prints a table: auto as a
# share of the best hand-tuned rate and against the default.
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/autotune/runs --as runs`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out/autotune
SECONDS_PER_RUN=30
PHOTO_IMAGES=2048
PNG_IMAGES=8192
WORKLOADS="photo png http sleep"
MODE=compare
ROUNDS=5
WINDOW_SECONDS=5
SECONDS_GIVEN=
while [[ $# -gt 0 ]]; do
  case $1 in
    --mode) MODE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --window-seconds) WINDOW_SECONDS=$2; shift 2 ;;
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; SECONDS_GIVEN=1; shift 2 ;;
    --photo-images) PHOTO_IMAGES=$2; shift 2 ;;
    --png-images) PNG_IMAGES=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case $MODE in
  compare) ;;
  rebuild) WORKLOADS=photo; [[ -z $SECONDS_GIVEN ]] && SECONDS_PER_RUN=20 ;;
  *) echo "unknown mode $MODE (compare or rebuild)" >&2; exit 2 ;;
esac

if [[ ! -x $BUILD/bin/autotune_bench || ! -x $BUILD/bin/dataloader_bench ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  ninja -C "$BUILD" >&2
fi
DE=$BUILD/bin/dataecho
BENCH=$BUILD/bin/autotune_bench
FM=/usr/share/datasets/fashion-mnist
DATA=$OUT/data
RUNS=$OUT/runs
mkdir -p "$DATA" "$RUNS"
# shellcheck source=bench/dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"
has() { [[ " $WORKLOADS " == *" $1 "* ]]; }
if has photo || has http; then prepare_photos "$PHOTO_IMAGES"; fi
if has png; then prepare png "$PNG_IMAGES" --encode png; fi

SERVE_PID=
cleanup() { [[ -n $SERVE_PID ]] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; true; }
trap cleanup EXIT
PORT=
if has http; then
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$DE" serve "$DATA/photo_tar" --port "$PORT" --rate 20m >"$OUT/serve.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/train-00000.tar" -r 0-0 && break; sleep 0.2; done
fi

# write_spec OUT WORKLOAD MAP_PARALLELISM PREFETCH_BUFFER INTERLEAVE_PARALLELISM
write_spec() {
  local out=$1 wl=$2 par=$3 buf=$4 ipar=$5 head map
  case $wl in
    photo)
      head="\"source\": {\"kind\": \"tar\", \"uri\": \"$DATA/photo_tar/train-*.tar\", \"fields\": {\"image\": \"jpg\", \"label\": \"cls\"}},
  \"stages\": [{\"op\": \"repeat\"},"
      map="{\"op\": \"map\", \"fn\": \"decode_augment\", \"args\": $JPEG_ARGS, \"parallelism\": $par}, {\"op\": \"batch\", \"size\": 128}" ;;
    png)
      head="\"source\": {\"kind\": \"tar\", \"uri\": \"$DATA/png_tar/train-*.tar\", \"fields\": {\"image\": \"png\", \"label\": \"cls\"}},
  \"stages\": [{\"op\": \"repeat\"},"
      map="{\"op\": \"map\", \"fn\": \"decode_augment\", \"args\": $PNG_ARGS, \"parallelism\": $par}, {\"op\": \"batch\", \"size\": 128}" ;;
    http)
      local uris="" i
      for i in 0 1 2 3; do uris+="${uris:+, }\"http://127.0.0.1:$PORT/train-0000$i.tar\""; done
      head="\"source\": {\"kind\": \"tar\", \"uri\": [$uris], \"fields\": {\"image\": \"jpg\", \"label\": \"cls\"}},
  \"stages\": [{\"op\": \"interleave\", \"cycle\": 4${ipar:+, \"parallelism\": $ipar}}, {\"op\": \"repeat\"},"
      map="{\"op\": \"map\", \"fn\": \"decode_augment\", \"args\": $JPEG_ARGS, \"parallelism\": $par}, {\"op\": \"batch\", \"size\": 128}" ;;
    sleep)
      head="\"source\": {\"kind\": \"range\", \"count\": 1000000000},
  \"stages\": ["
      map="{\"op\": \"map\", \"fn\": \"sleep\", \"args\": {\"ms\": 8}, \"parallelism\": $par}, {\"op\": \"map\", \"fn\": \"burn\", \"args\": {\"iterations\": 240000}}" ;;
  esac
  cat > "$out" <<EOF
{
  "seed": 7,
  $head
    $map,
    {"op": "prefetch", "buffer": $buf}
  ]
}
EOF
}

if [[ $MODE == rebuild ]]; then
  # shellcheck source=bench/autotune_rebuild.sh
  source "$ROOT/bench/autotune_rebuild.sh"
  run_rebuild_mode
  exit 0
fi

declare -A SWEEP=([photo]="1 2 3 4" [png]="1 2 3 4" [http]="1 2 3 4" [sleep]="1 2 4 8 12 16")
for wl in $WORKLOADS; do
  runs=("default 1 2 -" "auto \"auto\" \"auto\" \"auto\"")
  for p in ${SWEEP[$wl]}; do runs+=("hand$p $p 4 -"); done
  for r in "${runs[@]}"; do
    read -r name par buf ipar <<<"$r"
    [[ $ipar == - ]] && ipar=
    spec_file=$RUNS/${wl}_$name.spec.json
    write_spec "$spec_file" "$wl" "$par" "$buf" "$ipar"
    timed "${wl}_$name" "$BENCH" --spec "$spec_file" --seconds "$SECONDS_PER_RUN"
  done
done

source "$ROOT/scripts/commit_state.sh"
COMMIT=$(commit_state "$ROOT") /usr/bin/python3 - "$RUNS" "$OUT/autotune_compare.json" "$WORKLOADS" "$SECONDS_PER_RUN" <<'PY'
import glob, json, os, re, sys
runs, out, workloads, seconds = sys.argv[1], sys.argv[2], sys.argv[3].split(), float(sys.argv[4])
def peak_rss_mib(path):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(path).read())
    return int(m.group(1)) / 1024 if m else None
result = {"seconds_per_run": seconds, "commit": os.environ["COMMIT"],
          "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg()[0], "workloads": {}}
print(f"{'workload':8} {'default':>9} {'best hand':>14} {'auto':>9} {'auto/best':>9} {'auto/default':>12} {'auto chose':<32} {'peak RSS auto/best MiB':>22}")
for wl in workloads:
    rows = {}
    for f in glob.glob(f"{runs}/{wl}_*.json"):
        if f.endswith(".spec.json"):
            continue
        name = os.path.basename(f)[len(wl) + 1:-5]
        r = json.load(open(f))
        r["peak_rss_mib"] = peak_rss_mib(f[:-5] + ".time")
        r.pop("stats", None)
        rows[name] = r
    hands = {k: v for k, v in rows.items() if k.startswith("hand")}
    best = max(hands, key=lambda k: hands[k]["rows_per_s"])
    auto, default = rows["auto"], rows["default"]
    chose = ", ".join(f"{k['node'].split(':')[1]} {k['param']}={k['value']}" for k in auto["tuning"]["knobs"])
    entry = {"runs": rows, "best_hand": best, "auto_over_best_hand": auto["rows_per_s"] / hands[best]["rows_per_s"],
             "auto_over_default": auto["rows_per_s"] / default["rows_per_s"],
             "auto_settled_over_best_hand_settled": auto.get("rows_per_s_second_half", 0) / max(1e-9, hands[best].get("rows_per_s_second_half", 0))}
    result["workloads"][wl] = entry
    print(f"{wl:8} {default['rows_per_s']:9.0f} {hands[best]['rows_per_s']:9.0f} ({best:>4}) {auto['rows_per_s']:9.0f} "
          f"{entry['auto_over_best_hand']:9.1%} {entry['auto_over_default']:11.2f}x {chose[:32]:<32} "
          f"{auto['peak_rss_mib']:10.0f} / {hands[best]['peak_rss_mib']:.0f}")
json.dump(result, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
