#!/usr/bin/env bash
# The network-bound experiment of docs/results.md: converts and serves the shards as the
# demo does (throttled nginx on loopback, bandwidth calibrated to R = R_TARGET, default
# 5), then runs an experiment spec of this folder over it (default network.json; also
# network_variants.json). Rerunning resumes: finished runs are skipped (the bandwidth is
# recalibrated, so keep the machine as quiet as it was).
#   experiments/run_network.sh [network|network_variants] [extra dataecho experiment flags]
set -euo pipefail
cd "$(dirname "$0")/.."
NAME="${1:-network}"
shift || true
OUT="${NETWORK_OUT:-out/network}"
R_TARGET="${R_TARGET:-5}"
MODEL_ARGS="--model cnn --depth 2 --width 16 --threads 2"
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho}"
[[ -x "$BIN" ]] || { echo "run_network: no $BIN (scripts/bootstrap.sh builds it, or set DATAECHO_BIN)" >&2; exit 1; }
mkdir -p "$OUT"
# A stable port per experiment (the URL is in every run's config: see free_port).
case "$NAME" in
  network) PREFERRED_PORT=28531 ;;
  network_variants) PREFERRED_PORT=28532 ;;
  network_batch) PREFERRED_PORT=28533 ;;
  *) PREFERRED_PORT=28539 ;;
esac
source experiments/network_lib.sh
trap stop_server EXIT
make_shards
calibrate
MAX_FACTOR="$(cal factor "$R_MEASURED" 3 1)"
render_config experiments/network_train.json "$OUT/config/network_train.json"
render_config "experiments/$NAME.json" "$OUT/config/$NAME.json"
{
  echo "date: $(date -Is)"
  echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "bandwidth: ${RATE} bytes/s per connection x ${CONNECTIONS}"
  echo "R before training: ${R_MEASURED} (upstream ${T_UP_MS} ms/batch, train step ${T_DOWN_MS} ms/batch)"
} | tee -a "$OUT/calibration_$NAME.txt"
"$BIN" experiment "$OUT/config/$NAME.json" --progress lines "$@"
