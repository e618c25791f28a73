#!/usr/bin/env bash
# The README's main job end to end, in small (scripts/demo.sh --smoke): the install
# check, conversion, nginx, calibration, the three training runs, the snapshot
# evaluations, the table and the plots, on tiny budgets. A change that breaks the demo's
# path fails here. Uses the checkout's build/bin/dataecho as the demo does when BIN is
# that binary (the demo's own path: no DATAECHO_BIN, the checkout's commit); any other
# BIN is passed on as DATAECHO_BIN.
#   tests/cli/demo_smoke_test.sh BIN REPO
set -euo pipefail
BIN=$(realpath "$1")
REPO=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
env=(DEMO_OUT="$tmp/out")
[[ "$BIN" == "$REPO/build/bin/dataecho" ]] || env+=(DATAECHO_BIN="$BIN" DATAECHO_COMMIT=demo-smoke-test)
began=$SECONDS
(cd "$REPO" && env "${env[@]}" scripts/demo.sh --smoke) >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "scripts/demo.sh --smoke failed"; }
cat "$tmp/log"
exp="$tmp/out/demo"
table="$exp/table.txt"
[[ -f "$table" ]] || fail "no $table"
# Its three rows (the held reading), then the same three read by their first touch.
for cell in baseline 'before_aug-e[2-6]-sb1000' 'adaptive-m[3-7]-sb1000'; do
  [[ $(grep -cE "^$cell +[01]/1 " "$table") -eq 1 ]] || fail "table: no row for $cell: $(cat "$table")"
  [[ $(grep -cE "^  $cell +[01]/1 " "$table") -eq 1 ]] || fail "table: no first-touch row for $cell: $(cat "$table")"
done
grep -q '^read by the first touch instead' "$table" || fail "table: not read as held, with the first touch beside"
for f in results.csv results.json; do [[ -s "$exp/$f" ]] || fail "no $exp/$f"; done
# Snapshots every 2,500 fresh examples: the baseline's 7,680 give 3, an echo run's 1.
for run in "$exp"/cells/*/seed-1; do
  [[ $(wc -l <"$run/evals.jsonl") -ge 1 ]] || fail "$run: no snapshot evaluation"
done
[[ $(wc -l <"$exp/cells/baseline/seed-1/evals.jsonl") -ge 3 ]] || fail "the baseline: fewer than 3 snapshot evaluations"
grep -q '^evaluating snapshots after training' "$tmp/log" || fail "no progress while evaluating the snapshots"
[[ $(ls -d "$exp"/cells/*/seed-1 | wc -l) -eq 3 ]] || fail "expected 3 runs in $exp/cells"
for p in fresh_vs_factor accuracy_vs_fresh speedup_vs_factor; do
  [[ -s "$exp/plots/$p.png" && -s "$exp/plots/$p.svg" ]] || fail "no plot $p: $(ls "$exp/plots" 2>&1)"
done
grep -q 'demo runs at R = ' "$tmp/log" || fail "no calibration line"
echo "demo_smoke: ok ($((SECONDS - began)) s)"
