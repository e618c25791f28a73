#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs Fashion-MNIST (Debian's
# dataset-fashion-mnist) through an echoing pipeline, printing the first batches (ids,
# echo indices, shapes) and the per-stage stats.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
out=out/demo
mkdir -p "$out"
echo "== first 3 batches (ids and echo index per row; echo 1 = a repeat)"
build/bin/dataecho pipe examples/demo_pipeline.json --limit 3 | cut -c1-300
echo "== one full epoch with stats"
build/bin/dataecho pipe examples/demo_pipeline.json --stats --stats-json "$out/stats.json" > "$out/batches.jsonl"
echo "batches: $(wc -l < "$out/batches.jsonl")  (outputs in $out/)"
