#!/usr/bin/env bash
# The language-model protocol of docs/lm_protocol.md, in resumable parts.
#   experiments/lm/run.sh sweep [dataecho experiment flags]
#       the tuning sweep and the fresh-sequence counts: every cell of sweep.json, on local
#       files, after the committed runs (results/lm/sweep). Interrupt it at any time
#       (Ctrl-C, or `timeout -s INT 40m ...`): finished runs are kept and never redone;
#       the run in flight starts over next time.
#   experiments/lm/run.sh collect
#       copies the finished runs' files (result.json, summary.json, evals.jsonl) into
#       results/lm/<experiment>/, where they are committed.
#   experiments/lm/run.sh report [dataecho experiment flags]
#       the tables of results/lm/ recomputed from the committed run files alone (trains
#       nothing, needs no corpus).
#   experiments/lm/run.sh sweep --dry-run
#       renders the configs and checks them with `dataecho experiment --dry-run`.
# DATAECHO_BIN: the binary, by default build/bin/dataecho (copy build/bin/dataecho-train
# for a long run, as experiments/protocol/run.sh says). LM_OUT: default out/lm. The
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
  sweep | collect | report) ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
source scripts/run_files.sh
# The configs go to $CFG/config*/ with @OUT@ = $ROUT.
experiment_setup "$PART" results/lm
mkdir -p "$CFG/config"
for f in protocol train valid test sweep; do
  sed -e "s#@GCIDE@#../gcide#g" -e "s#@ENTRIES@#$ENTRIES#g" -e "s#@OUT@#$ROUT#g" \
    "experiments/lm/$f.json" >"$CFG/config/$f.json"
done

if [[ "$PART" == collect ]]; then
  collect_runs "$OUT/sweep" results/lm/sweep
  exit 0
fi
if [[ "$PART" == report ]]; then
  mkdir -p "$ROUT/sweep"
  "$BIN" experiment "$CFG/config/sweep.json" --report-only "$@" | tee "$ROUT/sweep/table.txt"
  exit 0
fi

[[ -f "$OUT/gcide/split.json" ]] || /usr/bin/python3 scripts/gcide_split.py --out "$OUT/gcide"
# Runs committed from another machine join the output folder and are not redone.
if [[ -d results/lm/sweep/cells ]]; then
  mkdir -p "$OUT/sweep"
  cp -rn results/lm/sweep/cells "$OUT/sweep/"
fi
echo "== the language-model sweep (docs/lm_protocol.md), output in $OUT/sweep"
"$BIN" experiment "$CFG/config/sweep.json" --progress lines "$@"
