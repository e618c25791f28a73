#!/usr/bin/env bash
# Resume time of an elastic pipeline saved at the start and at the end of an epoch, beside
# file sharding's: a restore reads the state's buffers and positions, never the elements
# consumed before the save, so the end of the epoch should restore about as fast as its start.
#
#   bench/elastic_resume_time.sh [--build DIR] [--out DIR] [--rounds R] [--lanes K]
#
# The data: the first 50,000 Fashion-MNIST images as 8 TFRecord shards of PNGs
# (`dataecho convert`, kept in OUT/elastic_resume_data). The pipeline: interleave 4 ->
# shuffle 10000 -> echo 2 -> decode_image -> batch 128, one epoch: 100,000 rows, 781 whole
# batches. States are saved by `dataecho pipe --limit S --save-state` after S batches:
#   elastic  --world-size 1 --lanes K, saved after step 1 (start) and step 775 (end), and
#            restored on one rank (M=1) and as rank 0 of two (M=2, the resume on another
#            number of ranks);
#   files    no shard stage (M=1), saved after 1 and 775; a shard stage 2/0 (rank 0 of M=2,
#            its 4 shards: 390 batches), saved after 1 and 385, restored on the same rank.
# Each restore is a fresh process `dataecho pipe --restore-state STATE --limit 1`, timed to
# its first batch on stdout (pipe flushes it before it tears the pipeline down) and to its
# exit; so is the fresh start of each (no state), and a one-element range pipeline (the
# process's own cost, which every time above includes). Each round runs every case once, the
# order reversed in every other round. Reported: the medians over R rounds (default 5) and
# the end/start ratio of the first-batch times; the load average before and after each
# round (other work on the machine moves these times). Writes OUT/elastic_resume_time.json
# (every run) and prints a table.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
ROUNDS=5
LANES=12
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --lanes) LANES=$2; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "elastic_resume_time: unknown option $1" >&2; exit 2 ;;
  esac
done
DE=$BUILD/bin/dataecho
FASHION=/usr/share/datasets/fashion-mnist
[[ -x $DE ]] || { echo "elastic_resume_time: $DE is not built" >&2; exit 1; }
[[ -f $FASHION/train-images-idx3-ubyte.gz ]] ||
  { echo "elastic_resume_time: $FASHION is missing (dataset-fashion-mnist)" >&2; exit 1; }
DATA=$OUT/elastic_resume_data
RUNS=$OUT/elastic_resume_runs
mkdir -p "$RUNS"
if [[ ! -f $DATA/done ]]; then
  rm -rf "$DATA"
  "$DE" convert --images "$FASHION/train-images-idx3-ubyte.gz" \
    --labels "$FASHION/train-labels-idx1-ubyte.gz" --limit 50000 --shards 8 --out "$DATA"
  touch "$DATA/done"
fi

# spec FILE [SHARD-STAGE]: the pipeline, with a stage first when given.
spec() {
  cat >"$1" <<JSON
{"seed": 7, "source": {"kind": "tfrecord", "uri": "$DATA/data-{00000..00007}-of-00008.tfrecord"},
 "stages": [${2:-} {"op": "interleave", "cycle": 4}, {"op": "shuffle", "buffer": 10000},
   {"op": "echo", "factor": 2}, {"op": "map", "fn": "decode_image"}, {"op": "batch", "size": 128}]}
JSON
}
spec "$RUNS/plain.json"
echo '{"source": {"kind": "range", "count": 1}}' >"$RUNS/floor.json"
spec "$RUNS/shard0.json" '{"op": "shard", "num_shards": 2, "index": 0},'
ELASTIC1="--world-size 1 --rank 0 --lanes $LANES"
ELASTIC2="--world-size 2 --rank 0 --lanes $LANES"

save() {  # save NAME STEPS SPEC [ARGS...]: RUNS/NAME.state after STEPS batches
  local name=$1 steps=$2 file=$3
  shift 3
  "$DE" pipe "$file" "$@" --limit "$steps" --save-state "$RUNS/$name.state" >/dev/null
  echo "saved $name: $(stat -c %s "$RUNS/$name.state") bytes"
}
# shellcheck disable=SC2086
{
  save elastic-start 1 "$RUNS/plain.json" $ELASTIC1
  save elastic-end 775 "$RUNS/plain.json" $ELASTIC1
  save files1-start 1 "$RUNS/plain.json"
  save files1-end 775 "$RUNS/plain.json"
  save files2-start 1 "$RUNS/shard0.json"
  save files2-end 385 "$RUNS/shard0.json"
}

/usr/bin/python3 - "$DE" "$RUNS" "$ROUNDS" "$OUT/elastic_resume_time.json" "$ELASTIC1" "$ELASTIC2" <<'PY'
"""Times each case's restore in fresh processes, rounds alternating; prints the table."""
import json
import os
import statistics
import subprocess
import sys
import time

de, runs, rounds, out, elastic1, elastic2 = sys.argv[1:7]
rounds = int(rounds)
plain, shard0 = f"{runs}/plain.json", f"{runs}/shard0.json"
# (case, spec, extra arguments, state prefix, rows of its first batch)
CASES = [
    ("elastic M=1", plain, elastic1.split(), "elastic", 128),
    ("elastic M=2 rank 0", plain, elastic2.split(), "elastic", 64),
    ("files M=1", plain, [], "files1", 128),
    ("files M=2 rank 0", shard0, [], "files2", 128),
]
POINTS = ("fresh", "start", "end")


def run_once(spec: str, args: list[str], state: str | None) -> dict:
    """One process: seconds to its first batch on stdout and to its exit; the batch's rows."""
    cmd = [de, "pipe", spec, *args, "--limit", "1"]
    if state:
        cmd += ["--restore-state", state]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    t1 = time.perf_counter()
    err = p.stderr.read()
    p.wait()
    t2 = time.perf_counter()
    if p.returncode != 0 or not line:
        sys.exit(f"elastic_resume_time: {' '.join(cmd)} failed ({p.returncode}): {err}")
    return {"first_batch_s": t1 - t0, "exit_s": t2 - t0, "rows": len(json.loads(line)["ids"])}


def load() -> list[float]:
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


FLOOR = ("floor", f"{runs}/floor.json", [], "", 1)
order = [(FLOOR, "fresh")] + [(c, p) for c in CASES for p in POINTS]
runs_out, loads = [], []
for k in range(rounds):
    before = load()
    for (name, spec, args, prefix, rows), point in order if k % 2 == 0 else reversed(order):
        state = None if point == "fresh" else f"{runs}/{prefix}-{point}.state"
        r = run_once(spec, args, state)
        if r["rows"] != rows:
            sys.exit(f"elastic_resume_time: {name}, {point}: a first batch of {r['rows']} rows, "
                     f"not {rows}")
        runs_out.append({"round": k + 1, "case": name, "point": point, **r})
    loads.append({"round": k + 1, "before": before, "after": load()})
    print(f"round {k + 1}: load average {before[0]:.2f} -> {loads[-1]['after'][0]:.2f}", flush=True)


def median(name: str, point: str, key: str) -> float:
    return statistics.median(r[key] for r in runs_out if r["case"] == name and r["point"] == point)


summary = {}
print(f"\n{'case':<20} {'fresh start':>12} {'restore start':>14} {'restore end':>12} "
      f"{'end/start':>10} {'to exit (start, end)':>22}  state bytes (start, end)")
for name, _, _, prefix, _ in CASES:
    s = {p: median(name, p, "first_batch_s") for p in POINTS}
    e = {p: median(name, p, "exit_s") for p in ("start", "end")}
    size = {p: os.path.getsize(f"{runs}/{prefix}-{p}.state") for p in ("start", "end")}
    s["end_over_start"] = s["end"] / s["start"]
    summary[name] = {"first_batch_s": s, "exit_s": e, "state_bytes": size}
    print(f"{name:<20} {s['fresh']:>11.3f}s {s['start']:>13.3f}s {s['end']:>11.3f}s "
          f"{s['end_over_start']:>10.2f} {e['start']:>10.3f}s {e['end']:>9.3f}s  "
          f"{size['start']:,} {size['end']:,}")
floor = median("floor", "fresh", "first_batch_s")
summary["floor"] = {"first_batch_s": {"fresh": floor}}
print(f"a one-element range pipeline (every time above includes it): {floor:.3f}s")
result = {"rounds": rounds, "median_of": "rounds", "summary": summary, "loads": loads,
          "runs": runs_out, "nproc": os.cpu_count(), "command": sys.argv[1:]}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
print(json.dumps({k: v["first_batch_s"] for k, v in summary.items()}))
PY
