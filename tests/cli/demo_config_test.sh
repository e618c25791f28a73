#!/usr/bin/env bash
# The README's main job reads its learning rates from the committed sweep
# (results/protocol/sweep): for every a-priori e it may pick (round(R), 2 to 6), the
# demo's configs must render and validate, and every cell must get a tuned rate, the
# adaptive cell the same as e's (experiments/protocol/run.sh demo --dry-run: no shards,
# no server, no training).
set -euo pipefail
BIN=$1
REPO=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rate() {  # rate CELL FILE: the learning rate the dry run chose for CELL
  sed -n "s/^\[tune [0-9]*\/[0-9]*\] $1: learning rate \([0-9.eE+-]*\)$/\1/p" "$2"
}
for e in 2 3 4 5 6; do
  out="$tmp/e$e.txt"
  (cd "$REPO" && PROTOCOL_OUT="$tmp/out" DEMO_FACTOR=$e DATAECHO_BIN="$BIN" DATAECHO_COMMIT=test \
    experiments/protocol/run.sh demo --dry-run) >"$out" 2>&1 || fail "e = $e: $(cat "$out")"
  base=$(rate baseline "$out")
  echo_lr=$(rate "before_aug-e$e-sb1000" "$out")
  adaptive=$(rate "adaptive-m$((e + 1))-sb1000" "$out")
  [[ -n "$base" && -n "$echo_lr" ]] || fail "e = $e: a cell without a tuned rate: $(cat "$out")"
  [[ "$adaptive" == "$echo_lr" ]] || fail "e = $e: adaptive took '$adaptive', e's rate is $echo_lr"
  [[ $(grep -c '^  dry run: ' "$out") -eq 3 ]] || fail "e = $e: expected 3 runs: $(cat "$out")"
  grep -q "\"factor\":$e,\"op\":\"echo\"" "$out" || fail "e = $e: no echo of factor $e: $(cat "$out")"
  grep -q '"factor":"adaptive","max_factor":'$((e + 1)) "$out" || fail "e = $e: no adaptive echo"
  echo "e = $e: baseline $base, e $echo_lr, adaptive $adaptive"
done
[[ ! -e "$tmp/out/shards" ]] || fail "the dry run converted the shards"
echo "demo_config: ok"
