#!/usr/bin/env bash
# Pilot runs that size the language-model workload before its protocol was
# registered: the baseline only (no echo cell ran before the registration), seed 1.
#   experiments/lm/pilot.sh ENTRIES STEPS LR [LR...]
#       trains experiments/lm/base.json on the first ENTRIES entries of dict-gcide's
#       training split for STEPS steps (the schedule decays to 0 at STEPS) at each LR,
#       into $LM_OUT/pilot/n<ENTRIES>-s<STEPS>/lr-<LR>/ (a finished run is not redone),
#       then prints per run: the passes over the prefix, the validation loss (bits per
#       byte) at every quarter of the budget, the best one and where it was, and the
#       late swing of the validation loss (what a loss target's rule is built from;
#       experiments/lm/pilot.py).
# LM_OUT: default out/lm (the split goes to $LM_OUT/gcide: scripts/gcide_split.py).
# DATAECHO_BIN: default build/bin/dataecho.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"  # the dataecho package (stats)
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho}"
OUT="${LM_OUT:-out/lm}"
[[ $# -ge 3 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2; }
ENTRIES="$1" STEPS="$2"
shift 2
[[ -f "$OUT/gcide/split.json" ]] || /usr/bin/python3 scripts/gcide_split.py --out "$OUT/gcide"
GCIDE="$(realpath "$OUT/gcide")"
CFG="$OUT/pilot/config-n$ENTRIES"
mkdir -p "$CFG"
for f in base train valid; do
  sed -e "s#@GCIDE@#$GCIDE#g" -e "s#@ENTRIES@#$ENTRIES#g" "experiments/lm/$f.json" >"$CFG/$f.json"
done
runs=()
for lr in "$@"; do
  d="$OUT/pilot/n$ENTRIES-s$STEPS/lr-$lr"
  runs+=("$d")
  [[ -f "$d/summary.json" ]] && continue
  echo "== pilot: $ENTRIES entries, $STEPS steps, lr $lr"
  "$BIN" train --config "$CFG/base.json" --lr "$lr" --max-steps "$STEPS" --progress off --out "$d" >/dev/null
done
/usr/bin/python3 -m experiments.lm.pilot "$GCIDE/train.jsonl.gz" "$ENTRIES" "${runs[@]}"
