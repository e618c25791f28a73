#!/usr/bin/env bash
# The pipeline demo (the main job before the network demo, scripts/demo.sh, took its
# place): installs what is missing, builds, and runs Fashion-MNIST (Debian's
# dataset-fashion-mnist) through an echoing pipeline, printing the first batches (ids,
# echo indices, shapes) and the per-stage stats. No training, about 10 s once built.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
out=out/pipe_demo
mkdir -p "$out"
echo "== first 3 batches (ids and echo index per row; echo 1 = a repeat)"
build/bin/dataecho pipe examples/demo_pipeline.json --limit 3 | cut -c1-300
echo "== one full epoch with stats"
build/bin/dataecho pipe examples/demo_pipeline.json --stats --stats-json "$out/stats.json" > "$out/batches.jsonl"
echo "batches: $(wc -l < "$out/batches.jsonl")  (outputs in $out/)"
