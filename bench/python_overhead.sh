#!/usr/bin/env bash
# Python's overhead over C++ on identical pipelines, and dataecho from Python against
# torch's DataLoader, in one run.
#
#   bench/python_overhead.sh [--build DIR] [--out DIR] [--jpeg-images N] [--png-images N]
#                            [--epochs E] [--rounds R] [--threads "1 2"]
#                            [--workloads "jpeg png jpeg_echo jpeg_echo_shared"]
#
# Data and specs are those of bench/dataloader_compare.sh (bench/dataloader_lib.sh): JPEG
# 256x256 RGB quality 90 and 28x28 PNG from Debian's Fashion-MNIST, as 4 tar shards and as
# a folder; the spec is tar -> map decode_augment (parallelism T) -> batch 128 ->
# prefetch 4; jpeg_echo is the JPEG spec with batch echoing (echo 2 after batch), where
# every echoed batch reaches Python as a copy (its buffer is shared with the echo stage),
# so its Python/C++ ratio is the cost of that copy; jpeg_echo_shared is jpeg_echo built
# with share_buffers=True (the opt-in: echoed batches handed over without the copy,
# docs/python.md). For each workload and thread count
# T, one after the other (same load):
#   cpp         build/bin/dataloader_bench pipeline --spec S (C++ pulls the batches);
#   python      bench/python_overhead.py --spec S (the same spec from Python, each batch
#               turned into torch tensors);
#   dataloader  bench/dataloader_compare.py: ImageFolder + torchvision transforms,
#               num_workers T, over the folder holding the same images.
# Each is wrapped in /usr/bin/time -v for its peak RSS (the DataLoader's workers' peaks
# are read from /proc by the script). Prints a table (median over rounds of each round's
# own ratio) and writes OUT/python_overhead.json.
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/python_overhead_runs --as runs`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
JPEG_IMAGES=1024
PNG_IMAGES=8192
EPOCHS=3
ROUNDS=2
THREADS="1 2"
WORKLOADS="jpeg png jpeg_echo jpeg_echo_shared"
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --jpeg-images) JPEG_IMAGES=$2; shift 2 ;;
    --png-images) PNG_IMAGES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "python_overhead: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"

PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
DATA=$OUT/dataloader_data
RUNS=$OUT/python_overhead_runs
RESULT=$OUT/python_overhead${RESULT_SUFFIX:-}.json
mkdir -p "$OUT" "$DATA" "$RUNS"

$PY -c 'import torch, torchvision' 2>/dev/null || {
  echo "python_overhead: $PY cannot import torch/torchvision (scripts/bootstrap.sh --bench-deps)" >&2; exit 1; }
if [[ ! -f $BUILD/build.ninja && ! -f $BUILD/Makefile ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
log "building dataecho_cli, dataloader_bench and the Python package in $BUILD"
cmake --build "$BUILD" --target dataecho_cli dataloader_bench dataecho_python >&2
DE=$BUILD/bin/dataecho
BENCH=$BUILD/bin/dataloader_bench
export PYTHONPATH=$BUILD/python

prepare jpeg "$JPEG_IMAGES" --resize 256 --encode jpeg --quality 90 --channels 3
prepare png "$PNG_IMAGES" --encode png
sync
sleep 2


START=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
  for wl in $WORKLOADS; do
    for t in $THREADS; do
      if [[ $wl == jpeg || $wl == jpeg_echo* ]]; then
        spec "$RUNS/${wl}_t$t.spec.json" "$DATA/jpeg_tar" jpg decode_augment "$JPEG_ARGS" "$t"
        dl_args=(--workload jpeg)
        if [[ $wl == jpeg_echo* ]]; then  # echo 2 right after the batch
          $PY - "$RUNS/${wl}_t$t.spec.json" <<'SPEC'
import json, sys
s = json.load(open(sys.argv[1]))
i = [k for k, st in enumerate(s["stages"]) if st["op"] == "batch"][0]
s["stages"].insert(i + 1, {"op": "echo", "factor": 2})
json.dump(s, open(sys.argv[1], "w"), indent=1)
SPEC
        fi
      else
        spec "$RUNS/${wl}_t$t.spec.json" "$DATA/png_tar" png decode_augment "$PNG_ARGS" "$t"
        dl_args=(--workload png --mean $PNG_MEAN --std $PNG_STD)
      fi
      timed "r${round}_${wl}_cpp_t$t" "$BENCH" pipeline --spec "$RUNS/${wl}_t$t.spec.json" --epochs "$EPOCHS"
      share=()
      [[ $wl == jpeg_echo_shared ]] && share=(--share-buffers)
      timed "r${round}_${wl}_python_t$t" $PY "$ROOT/bench/python_overhead.py" --spec "$RUNS/${wl}_t$t.spec.json" \
        --epochs "$EPOCHS" "${share[@]}"
      # The DataLoader's side of jpeg_echo* is jpeg's (it has no echo): not run twice.
      [[ $wl == jpeg_echo* && " $WORKLOADS " == *" jpeg "* ]] && continue
      timed "r${round}_${wl}_dataloader_t$t" $PY "$ROOT/bench/dataloader_compare.py" --root "$DATA/${wl%%_echo*}_dir" \
        "${dl_args[@]}" --workers "$t" --epochs "$EPOCHS"
    done
  done
done
ELAPSED=$(( $(date +%s) - START ))

$PY - "$RUNS" "$RESULT" "$ROUNDS" "$THREADS" "$ELAPSED" "$JPEG_IMAGES" "$PNG_IMAGES" "$EPOCHS" "$WORKLOADS" <<'PYEOF'
import json, os, re, statistics, sys
runs, out, rounds, threads, elapsed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), int(sys.argv[5])
jpeg_images, png_images, epochs, workloads = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9].split()

def load(name):
    with open(os.path.join(runs, name + ".json")) as f:
        j = json.loads([l for l in f.read().splitlines() if l.startswith("{")][-1])
    with open(os.path.join(runs, name + ".time")) as f:
        j["peak_rss_mib"] = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read()).group(1)) / 1024
    return j

rows = []
print(f"{'workload':16s} {'T':>2s} {'C++ img/s':>10s} {'Python':>10s} {'Py/C++':>7s} {'DataLoader':>11s} "
      f"{'Py/DL':>7s} {'RSS C++':>8s} {'RSS Py':>8s} {'RSS DL':>14s}")
for wl in workloads:
    for t in threads:
        dl_wl = "jpeg" if wl.startswith("jpeg_echo") and "jpeg" in workloads else wl  # jpeg's run (no echo there)
        r = [{"cpp": load(f"r{k}_{wl}_cpp_t{t}"), "python": load(f"r{k}_{wl}_python_t{t}"),
              "dataloader": load(f"r{k}_{dl_wl}_dataloader_t{t}")} for k in range(1, rounds + 1)]
        py_cpp = [x["python"]["images_per_s"] / x["cpp"]["images_per_s"] for x in r]
        py_dl = [x["python"]["images_per_s"] / x["dataloader"]["images_per_s"] for x in r]
        best = {side: max(x[side]["images_per_s"] for x in r) for side in ("cpp", "python", "dataloader")}
        rss = {side: max(x[side]["peak_rss_mib"] for x in r) for side in ("cpp", "python", "dataloader")}
        workers = max((sum(k for k in x["dataloader"].get("workers_vm_hwm_kib", []) if k) / 1024 for x in r), default=0)
        row = {"workload": wl, "threads": int(t), "best_images_per_s": best, "peak_rss_mib": rss,
               "dataloader_workers_peak_rss_mib_sum": workers,
               "python_over_cpp_rounds": py_cpp, "python_over_cpp": statistics.median(py_cpp),
               "python_over_dataloader_rounds": py_dl, "python_over_dataloader": statistics.median(py_dl),
               "python_copied_bytes": max(x["python"]["copied_bytes"] for x in r)}
        rows.append(row)
        print(f"{wl:16s} {t:>2s} {best['cpp']:10.0f} {best['python']:10.0f} {row['python_over_cpp']:7.3f} "
              f"{best['dataloader']:11.0f} {row['python_over_dataloader']:7.2f} {rss['cpp']:8.0f} {rss['python']:8.0f} "
              f"{rss['dataloader']:6.0f}+{workers:.0f}w")
result = {"rows": rows, "rounds": rounds, "epochs": epochs, "jpeg_images": jpeg_images, "png_images": png_images,
          "elapsed_s": elapsed, "load_average": os.getloadavg(),
          "method": "per round: C++ (dataloader_bench pipeline), Python (python_overhead.py) and the DataLoader "
                    "(dataloader_compare.py) on the same spec/files one after another; an epoch's rate excludes its "
                    "first batch; best epoch per run; ratios are the median over rounds of each round's own ratio"}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
print(f"wrote {out} ({elapsed} s)")
PYEOF
