#!/usr/bin/env bash
# The pre-registered experiment of docs/protocol.md, in resumable parts.
#   experiments/protocol/run.sh sweep [dataecho experiment flags]
#       the tuning sweep and the fresh-example counts: every cell of sweep.json, compute-
#       bound on local shards (a fixed echo factor gives the same data order whatever the
#       timing, tests/train/protocol_test.cc). Interrupt it at any time (Ctrl-C, or
#       `timeout -s INT 40m ...`): finished runs are kept and never redone; the run in
#       flight starts over next time.
#   experiments/protocol/run.sh collect
#       copies the finished runs' files (result.json, summary.json, evals.jsonl: small)
#       into docs/results/protocol/sweep/, where they are committed.
#   experiments/protocol/run.sh report [dataecho experiment flags]
#       every table and plot of docs/results/protocol/sweep/ recomputed from the
#       committed run files alone (trains nothing, needs no shards).
# Output: out/protocol/ (PROTOCOL_OUT): shards/, config/, sweep/ (cells/<id>/[tune/lr-*/]
# seed-*/{result.json,summary.json,evals.jsonl}, results.csv, results.json, plots/).
# The shards are named relative to the config folder (../shards), so a run's recorded
# config does not depend on where the checkout is: the committed files report anywhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
PART="${1:-}"
shift || true
OUT="${PROTOCOL_OUT:-out/protocol}"
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho}"
FASHION=/usr/share/datasets/fashion-mnist
[[ -x "$BIN" ]] || { echo "protocol: no $BIN (scripts/bootstrap.sh builds it, or set DATAECHO_BIN)" >&2; exit 1; }
case "$PART" in
  sweep | collect | report) ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
# Each run file records the commit it ran at (a "-dirty" suffix: uncommitted changes).
if [[ -z "${DATAECHO_COMMIT:-}" ]] && git rev-parse HEAD >/dev/null 2>&1; then
  DATAECHO_COMMIT="$(git rev-parse HEAD)$(git diff --quiet HEAD -- src include experiments || echo -dirty)"
fi
export DATAECHO_COMMIT="${DATAECHO_COMMIT:-unknown}"

COMMITTED=docs/results/protocol/sweep
mkdir -p "$OUT/config"
for f in experiments/protocol/*.json; do
  sed -e "s#@SHARDS@#../shards#g" -e "s#@OUT@#$OUT#g" "$f" >"$OUT/config/$(basename "$f")"
done
if [[ "$PART" == collect ]]; then
  mkdir -p "$COMMITTED"
  (cd "$OUT/sweep" && find cells -name result.json -printf '%h\n') | while read -r run; do
    mkdir -p "$COMMITTED/$run"
    for f in result.json summary.json evals.jsonl; do
      [[ -f "$OUT/sweep/$run/$f" ]] && cp "$OUT/sweep/$run/$f" "$COMMITTED/$run/$f"
    done
  done
  echo "protocol: $(find "$COMMITTED" -name result.json | wc -l) runs in $COMMITTED"
  exit 0
fi
if [[ "$PART" == report ]]; then
  exec "$BIN" experiment "$OUT/config/sweep.json" --out "$COMMITTED" --report-only "$@"
fi

# The first 50,000 training images as 8 PNG TFRecord shards; the last 10,000 are the
# validation split (validation.json reads them from the IDX file).
if [[ ! -f "$OUT/shards/.done" ]]; then
  rm -rf "$OUT/shards"
  "$BIN" convert --images "$FASHION/train-images-idx3-ubyte.gz" --labels "$FASHION/train-labels-idx1-ubyte.gz" \
    --to tfrecord --out "$OUT/shards" --name train --shards 8 --encode png --limit 50000
  touch "$OUT/shards/.done"
fi
echo "protocol sweep: commit $DATAECHO_COMMIT, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$BIN" experiment "$OUT/config/sweep.json" --progress lines "$@"
