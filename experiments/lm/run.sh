#!/usr/bin/env bash
# The language-model protocol of docs/lm_protocol.md, in resumable parts.
#   experiments/lm/run.sh sweep [dataecho experiment flags]
#       the tuning sweep and the fresh-sequence counts: every cell of sweep.json, on local
#       files, after the committed runs (results/lm/sweep). Interrupt it at any time
#       (Ctrl-C, or `timeout -s INT 40m ...`): finished runs are kept and never redone;
#       the run in flight starts over next time.
#   experiments/lm/run.sh retune [dataecho experiment flags]
#       the retuning of docs/lm_protocol.md: the baseline and echoing before pack at e = 2 and
#       4 (shuffle 100) tuned on seeds 101 and 102, then seeds 1-10 at the chosen rates
#       (retune.json, in $LM_OUT/retune); the sweep's runs of those cells join first and
#       are not redone where their config is the same. Resumable like the sweep.
#   experiments/lm/run.sh collect
#       adds the finished runs' files (result.json, summary.json, evals.jsonl) to
#       results/lm/<experiment>/runs.jsonl.xz (experiments/archive.py), where they are
#       committed; a run archived already stays, one whose files differ is an error.
#   experiments/lm/run.sh report [dataecho experiment flags]
#       the tables of results/lm/ recomputed from the committed runs alone (trains
#       nothing, needs no corpus). Every part first unpacks the committed archives into
#       results/lm/<experiment>/cells/ (git-ignored), where the report and the joins read.
#   experiments/lm/run.sh sweep --dry-run
#       renders the configs and checks them with `dataecho experiment --dry-run`.
#   experiments/lm/run.sh network R [dataecho experiment flags]
#       the wall-clock runs (docs/lm_protocol.md section 6): the training file
#       served by `dataecho serve` on loopback, throttled to the bandwidth at which
#       600-step baseline runs measure R about R (calibrated as experiments/protocol/run.sh
#       does, experiments/protocol/calibrate.py; kept in network-rR/calibration.txt), then
#       network.json: the baseline, example echoing before pack at e = round(R) and
#       adaptive, 5 seeds each, at the sweep's chosen rates. Needs those rates (the sweep's
#       baseline and before_pack-e<round(R)>-sb100 tuned). Resumable like the sweep.
#       Output network-rR; with LM_SETUP=NAME (lowercase letters and digits), a setup of
#       its own registered as a protocol change (its trainer in DATAECHO_BIN), calibrated
#       and run in network-NAME-rR: LM_SETUP=stream is the streamed setup's.
# DATAECHO_BIN: the binary, by default build/bin/dataecho (copy build/bin/dataecho-train
# for a long run, as experiments/protocol/run.sh says, with the commit it was built from
# in DATAECHO_BIN.commit: scripts/run_files.sh experiment_setup). LM_OUT: default out/lm. The
# corpus split (scripts/gcide_split.py) goes to $LM_OUT/gcide; the configs name it
# relative to their folder (../gcide), so a run's recorded config does not depend on
# where the checkout is.
set -euo pipefail
cd "$(dirname "$0")/../.."
PART="${1:-}"
shift || true
OUT="${LM_OUT:-out/lm}"
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho}"
ENTRIES=500
[[ -x "$BIN" ]] || { echo "lm: no $BIN (scripts/bootstrap.sh builds it, or set DATAECHO_BIN)" >&2; exit 1; }
case "$PART" in
  sweep | collect | report | network | retune) ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
source scripts/run_files.sh
# The configs go to $CFG/config*/ with @OUT@ = $ROUT.
experiment_setup "$PART" results/lm
unpack_runs results/lm/*/
mkdir -p "$CFG/config"
# render DIR TRAIN_URL SHUFFLE [NETWORK_SUBST]: the configs in DIR, the training file at
# TRAIN_URL (the others always from ../gcide), the entry shuffle of SHUFFLE entries.
render() {
  mkdir -p "$1"
  local f url
  for f in protocol train valid test sweep retune ${4:+network}; do
    url=../gcide
    [[ "$f" != train ]] || url="$2"
    sed -e "s#@GCIDE@#$url#g" -e "s#@ENTRIES@#$ENTRIES#g" -e "s#@SHUFFLE@#$3#g" \
      -e "s#@OUT@#$ROUT#g" ${4:-} "experiments/lm/$f.json" >"$1/$f.json"
  done
}
render "$CFG/config" ../gcide 10000
# render_network NAME R FACTOR URL: the configs of the network runs NAME (network-rR, or
# network-SETUP-rR) in $CFG/config-NAME/ (the training file at URL, the entry shuffle of
# one pass, a-priori e = FACTOR).
render_network() {
  render "$CFG/config-$1" "$4" 500 \
    "-e s#@NAME@#$1#g -e s#@R_GOAL@#$2#g -e s#@FACTOR@#$3#g -e s#@MAX_FACTOR@#$(($3 + 1))#g"
}

if [[ "$PART" == collect ]]; then
  for exp in "$OUT"/sweep "$OUT"/retune "$OUT"/network-*; do
    [[ -d "$exp/cells" ]] || continue
    /usr/bin/python3 -m experiments.archive collect "$exp" "results/lm/$(basename "$exp")"
    for f in calibration.txt calibration_runs.txt; do
      if [[ -f "$exp/$f" ]]; then cp "$exp/$f" "results/lm/$(basename "$exp")/"; fi
    done
  done
  exit 0
fi
if [[ "$PART" == report ]]; then
  mkdir -p "$ROUT/sweep"
  "$BIN" experiment "$CFG/config/sweep.json" --report-only "$@" | tee "$ROUT/sweep/table.txt"
  if [[ -d "$ROUT/retune/cells" ]]; then
    "$BIN" experiment "$CFG/config/retune.json" --report-only "$@" | tee "$ROUT/retune/table.txt"
  fi
  for dir in "$ROUT"/network-*; do
    [[ -f "$dir/calibration.txt" ]] || continue
    name="$(basename "$dir")"
    render_network "$name" "${name##*-r}" "$(calibration_value "$dir/calibration.txt" factor)" \
      "$(calibration_value "$dir/calibration.txt" url)"
    "$BIN" experiment "$CFG/config-$name/network.json" --report-only "$@" | tee "$dir/table.txt"
  done
  exit 0
fi

[[ -f "$OUT/gcide/split.json" ]] || /usr/bin/python3 scripts/gcide_split.py --out "$OUT/gcide"
if [[ "$PART" == network ]]; then
  source experiments/lm/network.sh
  exit 0
fi
# Runs committed from another machine join the output folder and are not redone.
if [[ -d results/lm/sweep/cells ]]; then
  mkdir -p "$OUT/sweep"
  cp -rn results/lm/sweep/cells "$OUT/sweep/"
fi
if [[ "$PART" == retune ]]; then
  # The sweep's runs of the three cells (seed 101's tuning, seeds 1-5) and the retuning's own
  # committed runs join; the runner skips each whose config is the same.
  mkdir -p "$OUT/retune/cells"
  for cell in baseline before_pack-e2-sb100 before_pack-e4-sb100; do
    for from in "$OUT/sweep/cells/$cell" "results/lm/retune/cells/$cell"; do
      [[ ! -d "$from" ]] || cp -rn "$from" "$OUT/retune/cells/"
    done
  done
  echo "== the language model's retuning (docs/lm_protocol.md), output in $OUT/retune"
  exec "$BIN" experiment "$CFG/config/retune.json" --progress lines "$@"
fi
echo "== the language-model sweep (docs/lm_protocol.md), output in $OUT/sweep"
"$BIN" experiment "$CFG/config/sweep.json" --progress lines "$@"
