#!/usr/bin/env bash
# Data-parallel scaling over the throttled network (docs/distributed.md, "Measured").
#   experiments/distributed/run.sh [run | report]
# run: serves the protocol's 8 training shards (Fashion-MNIST's first 50,000 images, PNG;
# converted here unless experiments/protocol/run.sh made them) with `dataecho serve`
# (nginx on loopback) at RATE bytes/s per connection (default 243,908: the protocol's
# committed calibration, R about 4.6 for one process at batch 128), and trains the
# protocol's CNN to TARGET validation accuracy (default 0.88) at one global batch of 128:
#   1r-e1   1 rank  x 128, 2 LibTorch threads, no echo
#   2r-e1   2 ranks x 64,  1 thread each,      no echo
#   1r-eK   1 rank, echo before augmentation (shuffle 1,000 after it) at K = round(R) of
#           1r-e1's seed-1 run (the a-priori factor)
#   2r-eK   2 ranks, echo at K = round(R) of 2r-e1's seed-1 run
# SEEDS seeds each (default "1 2 3 4 5"), learning rate 0.05 (the protocol's tuned baseline
# rate) for all, the protocol's schedule (warm-up 100 steps, linear decay to 0 at 3,900),
# evaluation inline every 2,500 fresh examples on the 10,000 validation images (off the
# training clock). Each rank of a 2-rank job opens its own 4 connections (interleave
# cycle 4 over its 4 files), so it has its own bandwidth share, as a second machine would.
# Resumable: a run whose summary.json exists is not redone. Stop it with Ctrl-C.
# report: results/distributed/{runs.csv,summary.md} from the committed runs (the archive
# results/distributed/runs.jsonl.xz, unpacked into runs/ first: experiments/archive.py).
# Env: DATAECHO_BIN (default build/bin/dataecho-train), OUT (default out/distributed).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"  # the dataecho package (specs, stats)
source scripts/commit_state.sh
PART="${1:-run}"
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho-train}"
OUT="${OUT:-out/distributed}"
RATE="${RATE:-243908}"
TARGET="${TARGET:-0.88}"
SEEDS="${SEEDS:-1 2 3 4 5}"
RESULTS="${RESULTS:-results/distributed}"
FASHION=/usr/share/datasets/fashion-mnist

report() {
  mkdir -p "$RESULTS"
  /usr/bin/python3 -m experiments.archive unpack "$RESULTS"
  /usr/bin/python3 -m experiments.distributed.report "$RESULTS" >"$RESULTS/summary.md"
  cat "$RESULTS/summary.md"
}
if [[ "$PART" == report ]]; then
  report
  exit 0
fi
[[ "$PART" == run ]] || { sed -n '2,27p' "$0" >&2; exit 2; }
[[ -x "$BIN" ]] || { echo "distributed: no $BIN (build it, or set DATAECHO_BIN)" >&2; exit 1; }

SHARDS=out/protocol/shards
if [[ ! -f "$SHARDS/train-00007-of-00008.tfrecord" ]]; then
  SHARDS="$OUT/shards"
  if [[ ! -f "$SHARDS/.done" ]]; then
    "$BIN" convert --images "$FASHION/train-images-idx3-ubyte.gz" \
      --labels "$FASHION/train-labels-idx1-ubyte.gz" --to tfrecord --out "$SHARDS" --name train \
      --shards 8 --encode png --limit 50000
    touch "$SHARDS/.done"
  fi
fi
mkdir -p "$OUT/config"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" serve "$SHARDS" --port "$PORT" --rate "$RATE" >"$OUT/serve.log" 2>&1 &
SERVE_PID=$!
trap 'kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^http://' "$OUT/serve.log" && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT"

# spec FACTOR PER_RANK_BATCH: the protocol's training pipeline over $URL at that batch, with
# the echo (and a shuffle of 1,000 after it) before augmentation when FACTOR > 1
# (experiments/specs.py: edits through dataecho.PipelineDef).
sed -e "s#@SHARDS@#$URL#g" experiments/protocol/train.json >"$OUT/config/train.json"
spec() {
  /usr/bin/python3 -m experiments.specs edit "$OUT/config/train.json" "$OUT/config/train-e$1-b$2.json" \
    --set "batch.size=$2" --echo-after decode_image "$1" 1000 &&
    echo "$OUT/config/train-e$1-b$2.json"
}
sed -e "s#@SHARDS@#$SHARDS#g" experiments/protocol/validation.json >"$OUT/config/validation.json"

# train NAME RANKS FACTOR SEED: one run, unless done.
train() {
  local name="$1" ranks="$2" factor="$3" seed="$4" dir batch threads
  dir="$OUT/runs/$name/seed-$seed"
  if [[ -f "$dir/summary.json" ]]; then return; fi
  batch=$((128 / ranks))
  threads=$((2 / ranks))
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  echo "== $name seed $seed: $ranks rank(s) x batch $batch, echo $factor, $threads thread(s) each"
  "$BIN" train --train-spec "$(spec "$factor" "$batch")" --eval-spec "$OUT/config/validation.json" \
    --model cnn --depth 2 --width 16 --lr 0.05 --momentum 0.9 --weight-decay 5e-4 \
    --warmup-steps 100 --decay-steps 3900 --max-steps 3900 --target-accuracy "$TARGET" \
    --eval-every 0 --eval-every-fresh 2500 --threads "$threads" --seed "$seed" \
    --nproc "$ranks" --progress lines --out "$dir.tmp" >"$dir.log" 2>&1 ||
    { echo "   failed: $dir.log" >&2; tail -3 "$dir.log" >&2; return 1; }
  {
    echo "{\"name\": \"$name\", \"ranks\": $ranks, \"factor\": $factor, \"seed\": $seed,"
    echo " \"rate_bytes_per_s_per_connection\": $RATE, \"target\": $TARGET,"
    echo " \"commit\": \"$(commit_state . src include)\","
    echo " \"load_before\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
  } >"$dir.tmp/run.json"
  mv "$dir.tmp" "$dir"
  grep -E "^(stopped|to target|time|R )" "$dir.log" | sed 's/^/   /'
}

# The a-priori factor of a configuration: round(R) of its seed-1 baseline, at least 2.
factor_of() {
  /usr/bin/python3 -m experiments.protocol.calibrate factor \
    "$(/usr/bin/python3 -m experiments.runfiles value "$OUT/runs/$1/seed-1/summary.json" r_estimate)"
}

for seed in $SEEDS; do
  train 1r-e1 1 1 "$seed"
  train 2r-e1 2 1 "$seed"
  K1="$(factor_of 1r-e1)"
  K2="$(factor_of 2r-e1)"
  train "1r-e$K1" 1 "$K1" "$seed"
  train "2r-e$K2" 2 "$K2" "$seed"
done
# The finished runs join the committed archive (a run archived already stays as it is).
/usr/bin/python3 -m experiments.archive collect "$OUT" "$RESULTS" --under runs --marker summary.json \
  --files summary.json evals.jsonl run.json
report
