#!/usr/bin/env bash
# The main job (README quick start): data echoing on a slow network, end to end, on a
# fresh machine.
#  1. installs what is missing (scripts/bootstrap.sh --deps) and builds the dataecho tool;
#  2. converts Fashion-MNIST (Debian's dataset-fashion-mnist) to 8 TFRecord shards;
#  3. serves them with nginx on loopback, throttled to the bandwidth at which the
#     baseline pipeline's R (upstream time per batch / train step time) is about 5,
#     measured with `dataecho profile`, not assumed;
#  4. trains a small CNN to 87% test accuracy (2,000 test images, evaluated every 3,200
#     fresh examples) three times: no echo (baseline), example echoing before
#     augmentation with e = round(R), and adaptive echoing;
#  5. prints the side-by-side table (fresh examples, steps, time to target, speedup vs
#     the ideal min(e, R)) and draws the plots.
# Outputs: out/demo/ (experiment/results.csv, results.json, plots/*.png|svg, each run's
# evals.jsonl and summary.json). Rerunning skips the finished runs; rm -rf out/demo to
# start over. Environment: R_TARGET (default 5), DEMO_OUT (default out/demo),
# DATAECHO_BIN (use this binary, build nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

OUT="${DEMO_OUT:-out/demo}"
R_TARGET="${R_TARGET:-5}"
MODEL_ARGS="--model cnn --depth 2 --width 16 --threads 2"

scripts/bootstrap.sh --deps
BIN="${DATAECHO_BIN:-}"  # a dataecho binary to use instead of building build/
if [[ -z "$BIN" ]] && { [[ ! -x build/bin/dataecho ]] || ! build/bin/dataecho experiment --help >/dev/null 2>&1 ||
  [[ -n "$(find src include -newer build/bin/dataecho -print -quit)" ]]; }; then
  echo "== building build/bin/dataecho (release, with the trainer)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C build -j"$(nproc)" dataecho_cli
fi
BIN="${BIN:-$PWD/build/bin/dataecho}"
"$BIN" experiment --help >/dev/null 2>&1 || {
  echo "demo: this build has no trainer (libtorch-dev missing?): dataecho experiment is not there" >&2
  exit 1
}
mkdir -p "$OUT"
PREFERRED_PORT=28530  # a stable URL, so that a rerun skips the runs already done
# shellcheck source=../experiments/network_lib.sh
source experiments/network_lib.sh
trap stop_server EXIT

make_shards
calibrate
FACTOR="$(awk -v r="$R_MEASURED" 'BEGIN { f = int(r + 0.5); if (f < 2) f = 2; if (f > 8) f = 8; print f }')"
MAX_FACTOR="$(awk -v f="$FACTOR" 'BEGIN { print f + 1 }')"
render_config experiments/network_train.json "$OUT/config/network_train.json"
render_config experiments/demo.json "$OUT/config/demo.json"
echo "== training: baseline, example echoing before augmentation e=$FACTOR, adaptive (max $MAX_FACTOR)"
echo "   (measured R = $R_MEASURED at ${RATE} bytes/s per connection; target: 87% test accuracy)"
status=0
"$BIN" experiment "$OUT/config/demo.json" --progress lines | tee "$OUT/table.txt" || status=$?
stop_server

cat <<EOF

== data echoing over a throttled network: Fashion-MNIST, small CNN, 87% test accuracy
   bandwidth ${RATE} bytes/s per connection x ${CONNECTIONS}; R measured before training: ${R_MEASURED}
   (upstream $(printf %.1f "$T_UP_MS") ms/batch, train step $(printf %.1f "$T_DOWN_MS") ms/batch; the baseline run's own
   estimate is its R column). Speedup = baseline wall-clock time to target / the run's
   (evaluations included; every run evaluates every 3,200 fresh examples);
   ideal = min(achieved echo factor, baseline R). Full experiment: docs/results.md.
   table:   $OUT/table.txt, $OUT/experiment/results.csv, $OUT/experiment/results.json
   plots:   $OUT/experiment/plots/ (fresh_vs_factor, accuracy_vs_fresh, speedup_vs_factor; .png and .svg)
   runs:    $OUT/experiment/cells/*/seed-1/ (evals.jsonl, summary.json)
   done in $(($(date +%s) - start)) s
EOF
exit "$status"
