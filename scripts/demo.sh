#!/usr/bin/env bash
# The main job (README quick start): data echoing on a slow network, end to end, on a
# fresh machine, as the protocol's wall-clock runs do it (docs/protocol.md), in small.
#  1. installs what is missing (scripts/bootstrap.sh --deps) and builds the dataecho tool;
#  2. converts the first 50,000 Fashion-MNIST training images (Debian's
#     dataset-fashion-mnist) to 8 TFRecord shards; the last 10,000 are the validation
#     split the target is measured on;
#  3. serves the shards with nginx on loopback, throttled to the bandwidth at which a
#     200-step baseline training run, its pipeline beside the train step, measures an
#     upstream / downstream ratio R of about 5 (measured, not assumed);
#  4. trains the protocol's CNN three times, one seed: no echo (baseline), example echoing
#     before augmentation at the a-priori e = round(R), and adaptive echoing (max_factor
#     e + 1), each at the learning rate the experiment's committed sweep tuned for it and
#     on its schedule (decay to 0 at step 3,900), stopped at a demo budget of 2,600 steps,
#     to a demo target of 89% validation accuracy (the experiment: 90%, 5 seeds); a
#     snapshot every 2,500 fresh examples, evaluated after training, off the clock;
#  5. prints the side-by-side table (fresh examples, steps and wall-clock seconds to the
#     target, achieved echo factor, R, speedup against the ideal min(e, R)) with its
#     caveats, and draws the plots.
# It is experiments/protocol/run.sh demo with PROTOCOL_OUT=out/demo. Outputs: out/demo/
# (demo/table.txt, demo/results.csv, demo/results.json, demo/plots/*.png|svg, each run's
# files under demo/cells/). Rerunning skips the finished runs; rm -rf out/demo to start
# over. Environment: DEMO_R (default 5), DEMO_TARGET (default 0.89), DEMO_OUT (default
# out/demo), DATAECHO_BIN (use this binary, build nothing; its runs record the commit in
# DATAECHO_BIN.commit or DATAECHO_COMMIT: scripts/run_files.sh).
#
#   scripts/demo.sh --smoke   every step above on tiny budgets (4,096 images, one short
#                             calibration run, 60 steps a run, target 70%), in a minute
#                             or two, into out/demo-smoke: CI runs it
#                             (tests/cli/demo_smoke_test.sh); its figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
case "${1:-}" in
  "") ;;
  --smoke) export DEMO_SMOKE=1 DEMO_OUT="${DEMO_OUT:-out/demo-smoke}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac

scripts/bootstrap.sh --deps
BIN="${DATAECHO_BIN:-}"  # a dataecho binary to use instead of building build/
if [[ -z "$BIN" ]] && { [[ ! -x build/bin/dataecho ]] || ! build/bin/dataecho experiment --help >/dev/null 2>&1 ||
  [[ -n "$(find src include -newer build/bin/dataecho -print -quit)" ]]; }; then
  echo "== building build/bin/dataecho (release, with the trainer)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C build -j"$(nproc)" dataecho_cli
fi
"${BIN:-build/bin/dataecho}" experiment --help >/dev/null 2>&1 || {
  echo "demo: this build has no trainer (libtorch-dev missing?): dataecho experiment is not there" >&2
  exit 1
}
status=0
# Without DATAECHO_BIN the runs use build/bin/dataecho, built from this checkout, and
# record the checkout's commit; a binary of the user's is passed on with its commit.
PROTOCOL_OUT="${DEMO_OUT:-out/demo}" experiments/protocol/run.sh demo || status=$?
echo "   done in $(($(date +%s) - start)) s"
exit "$status"
