#!/usr/bin/env bash
# Why adaptive echo settles above R at R about 2 (docs/results.md, "Network runs at R
# about 2"): the same training run as the committed adaptive cell (seed 1, max_factor 3),
# over the same throttled shards, with the echo's queue of fresh elements at 8 (the
# default, as in the committed runs), 64 and 512, beside a baseline without the echo.
# Short runs (1,200 steps; the baseline 600) without evaluation: what is compared is the
# rate at which the pipeline read from the network and the echo factor it reached.
#
#   experiments/protocol/adaptive_buffer.sh [RUNS]   (default out/protocol/adaptive_buffer)
#
# Needs the protocol's shards (out/protocol/shards, made by `run.sh sweep`), DATAECHO_BIN
# (the trainer; the committed run used out/protocol/bin/dataecho-train-e7fb8f5, the
# binary of the network runs) and a quiet machine: the runs share its 2 cores with nothing.
# Writes RUNS/<n>-<config>/summary.json and prints one line per run (the configs and the
# lines: experiments/protocol/adaptive_buffer.py).
# ADAPTIVE_RUNS: the runs, as config:steps (default: the list of the committed
# runs of 2026-12-01, commit a61968f);
# the configs are baseline, adaptive_b8, adaptive_b64, adaptive_b512 and
# adaptive_default (the echo as the cell has it, no buffer named: the binary's default).
# The check of the new default (2026-12-01, commit 122c893) (1,024 elements, 16 MiB):
#   DATAECHO_BIN=build/bin/dataecho-train ADAPTIVE_RUNS="baseline:600 adaptive_default:1200
#   adaptive_b8:1200 adaptive_default:1200 adaptive_b8:1200" \
#   experiments/protocol/adaptive_buffer.sh out/protocol/adaptive_default
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"  # the dataecho package (specs)
BIN="${DATAECHO_BIN:-build/bin/dataecho-train}"
RUNS="${1:-out/protocol/adaptive_buffer}"
RATE=374153  # bytes/s per connection: the R about 2 calibration (network-r2/calibration.txt)
CELL=results/protocol/network-r2/cells/adaptive-m3-sb1000/seed-1/result.json
mkdir -p "$RUNS"
# shellcheck source=../network_lib.sh
source experiments/network_lib.sh
OUT=out/protocol  # network_lib.sh's start_server serves $OUT/shards, logs to $OUT/serve.log
PREFERRED_PORT=28549
trap stop_server EXIT
start_server "$RATE"
/usr/bin/python3 -m experiments.protocol.adaptive_buffer configs "$CELL" "$BASE_URL" "$RUNS"
i=0
for run in ${ADAPTIVE_RUNS:-baseline:600 adaptive_b8:1200 adaptive_b64:1200 adaptive_b512:1200 \
  adaptive_b8:1200 adaptive_b512:1200 adaptive_b64:1200}; do
  cfg=${run%%:*} steps=${run##*:} i=$((i + 1))
  dir="$RUNS/$i-$cfg"
  rm -rf "$dir"
  "$BIN" train --config "$RUNS/$cfg.json" --max-steps "$steps" --progress off --out "$dir" >"$dir.log" 2>&1
  /usr/bin/python3 -m experiments.protocol.adaptive_buffer line "$dir/summary.json" "$cfg"
done
