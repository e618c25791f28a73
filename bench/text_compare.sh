#!/usr/bin/env bash
# Text sequences, in one run:
#  1. text -> tokenize (bytes) -> bucket -> pad from Python, dataecho against torch's
#     DataLoader over the same files, at each worker count (bench/text_compare.py says
#     exactly what each side does), one side after the other at each count;
#  2. pack and padded_batch against hand loops doing the same copies
#     (build/bin/sequence_bench, bench/sequence_bench.cc).
#
#   bench/text_compare.sh [--build DIR] [--out DIR] [--mb MB] [--workers "0 1 2"]
#                         [--windows N] [--window-seconds S] [--repetitions R]
#
# The corpus (bench/text_compare.py corpus: paragraphs of the English text under
# /usr/share/doc, one per line, MB megabytes in 4 files) is written once to
# OUT/text_data (kept until --mb changes). Each Python side runs under /usr/bin/time -v.
# Writes OUT/text_compare.json and OUT/text_compare.md (a markdown table), with the runs
# under OUT/text_compare_runs. A run to keep goes to results/text_<YYYY-MM-DD>/ with a
# README.txt (command, commit, machine, load), its runs in that folder's archive
# (`python3 -m experiments.archive pack DEST --from out/text_compare_runs --as
# text_compare_runs`; results/README.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
MB=16
WORKERS="0 1 2"
WINDOWS=3
WINDOW_SECONDS=5
REPETITIONS=5
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --windows) WINDOWS=$2; shift 2 ;;
    --window-seconds) WINDOW_SECONDS=$2; shift 2 ;;
    --repetitions) REPETITIONS=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "text_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"  # log, timed

PY=/usr/bin/python3
DATA=$OUT/text_data
RUNS=$OUT/text_compare_runs
mkdir -p "$OUT" "$DATA" "$RUNS"
$PY -c 'import torch, numpy' 2>/dev/null || {
  echo "text_compare: $PY cannot import torch/numpy (scripts/bootstrap.sh --bench-deps)" >&2; exit 1; }
if [[ ! -f $BUILD/build.ninja && ! -f $BUILD/Makefile ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
log "building sequence_bench and the Python package in $BUILD"
cmake --build "$BUILD" --target sequence_bench dataecho_python >&2
export PYTHONPATH=$BUILD/python

if [[ -f $DATA/stamp && $(cat "$DATA/stamp") == "mb $MB" ]]; then
  log "corpus: kept ($DATA/stamp)"
else
  rm -f "$DATA"/part-*.txt "$DATA/stamp"
  log "corpus: bench/text_compare.py corpus --mb $MB"
  $PY "$ROOT/bench/text_compare.py" corpus --out "$DATA" --mb "$MB" > "$DATA/corpus.json"
  echo "mb $MB" > "$DATA/stamp"
fi

START=$(date +%s)
for t in $WORKERS; do
  for side in dataecho dataloader; do
    timed "${side}_w$t" $PY "$ROOT/bench/text_compare.py" run --side "$side" --workers "$t" \
      --files "$DATA/part-*.txt" --windows "$WINDOWS" --window-seconds "$WINDOW_SECONDS"
  done
done
log "sequence_bench: $REPETITIONS repetitions, randomly interleaved"
"$BUILD/bin/sequence_bench" --benchmark_repetitions="$REPETITIONS" --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_out="$RUNS/sequence_bench.json" \
  --benchmark_out_format=json > /dev/null
ELAPSED=$(( $(date +%s) - START ))

$PY - "$RUNS" "$OUT" "$DATA/corpus.json" "$WORKERS" "$ELAPSED" <<'PYEOF'
import json, os, re, sys
runs, out, corpus, workers, elapsed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), int(sys.argv[5])

def load(name):
    with open(os.path.join(runs, name + ".json")) as f:
        j = json.loads([l for l in f.read().splitlines() if l.startswith("{")][-1])
    with open(os.path.join(runs, name + ".time")) as f:
        j["peak_rss_mib"] = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read()).group(1)) / 1024
    return j

rows, md = [], []
md.append("| workers | dataecho tokens/s | DataLoader tokens/s | ratio | dataecho examples/s | DataLoader examples/s "
          "| dataecho PSS MiB | DataLoader PSS MiB (all processes) |")
md.append("|---|---|---|---|---|---|---|---|")
for t in workers:
    de, dl = load(f"dataecho_w{t}"), load(f"dataloader_w{t}")
    row = {"workers": int(t), "dataecho": de, "dataloader": dl,
           "tokens_ratio": de["tokens_per_s"] / dl["tokens_per_s"],
           "pss_ratio": de["peak_pss_sum_kib"] / dl["peak_pss_sum_kib"]}
    rows.append(row)
    md.append(f"| {t} | {de['tokens_per_s']/1e6:.2f} M | {dl['tokens_per_s']/1e6:.2f} M | {row['tokens_ratio']:.2f}x "
              f"| {de['examples_per_s']:.0f} | {dl['examples_per_s']:.0f} "
              f"| {de['peak_pss_sum_kib']/1024:.0f} | {dl['peak_pss_sum_kib']/1024:.0f} |")

with open(os.path.join(runs, "sequence_bench.json")) as f:
    gb = json.load(f)
med = {b["run_name"]: b for b in gb["benchmarks"] if b.get("aggregate_name") == "median"}
seq = {}
for name in ["BM_Pack", "BM_PackHand/via_source:0", "BM_PackHand/via_source:1", "BM_PaddedBatch",
             "BM_PaddedBatchHand/via_source:0", "BM_PaddedBatchHand/via_source:1"]:
    (b,) = [v for k, v in med.items() if k.split("/min_time")[0] == name]
    seq[name] = {"cpu_ms": b["cpu_time"], "real_ms": b["real_time"], "tokens_per_cpu_s": b["items_per_second"]}
md.append("")
md.append("| stage | stage tokens/s (CPU) | hand loop, from the vector | ratio | hand loop, through the source | ratio |")
md.append("|---|---|---|---|---|---|")
for st, hand in [("BM_Pack", "BM_PackHand"), ("BM_PaddedBatch", "BM_PaddedBatchHand")]:
    s, h0, h1 = seq[st], seq[hand + "/via_source:0"], seq[hand + "/via_source:1"]
    s["vs_hand_vector"] = s["tokens_per_cpu_s"] / h0["tokens_per_cpu_s"]
    s["vs_hand_source"] = s["tokens_per_cpu_s"] / h1["tokens_per_cpu_s"]
    md.append(f"| {st[3:]} | {s['tokens_per_cpu_s']/1e6:.0f} M | {h0['tokens_per_cpu_s']/1e6:.0f} M | "
              f"{s['vs_hand_vector']:.2f} | {h1['tokens_per_cpu_s']/1e6:.0f} M | {s['vs_hand_source']:.2f} |")
result = {"loaders": rows, "sequence_bench": seq, "sequence_bench_context": gb.get("context", {}),
          "corpus": json.load(open(corpus)), "elapsed_s": elapsed, "load_average_at_end": os.getloadavg(),
          "method": "bench/text_compare.py (both Python sides, loader_measure.measure_windows counting tokens; "
                    "examples/s = tokens/s x the epoch's examples/tokens; PSS = peak of the summed PSS of the "
                    "process and its workers, sampled every 0.2 s); sequence_bench medians of CPU time over "
                    "randomly interleaved repetitions"}
with open(os.path.join(out, "text_compare.json"), "w") as f:
    json.dump(result, f, indent=1)
with open(os.path.join(out, "text_compare.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))
print(f"wrote {out}/text_compare.json and text_compare.md ({elapsed} s)")
PYEOF
