#!/usr/bin/env bash
# Pilot runs that size the language-model workload (issue #47) before its protocol is
# registered: the baseline only (no echo cell runs before the registration), seed 1.
#   experiments/lm/pilot.sh ENTRIES STEPS LR [LR...]
#       trains experiments/lm/base.json on the first ENTRIES entries of dict-gcide's
#       training split for STEPS steps (the schedule decays to 0 at STEPS) at each LR,
#       into $LM_OUT/pilot/n<ENTRIES>-s<STEPS>/lr-<LR>/ (a finished run is not redone),
#       then prints per run: the passes over the prefix, the validation loss (bits per
#       byte) at every quarter of the budget, the best one and where it was, and the
#       late swing of the validation loss (what a loss target's rule is built from).
# LM_OUT: default out/lm (the split goes to $LM_OUT/gcide: scripts/gcide_split.py).
# DATAECHO_BIN: default build/bin/dataecho.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
/usr/bin/python3 - "$GCIDE/train.jsonl.gz" "$ENTRIES" "${runs[@]}" <<'PY'
import gzip, json, math, statistics, sys
path, entries, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
tokens = 0
with gzip.open(path, "rt", encoding="utf-8") as f:
    for i, line in enumerate(f):
        if i == entries:
            break
        tokens += len(json.loads(line)["text"].encode()) + 1  # bytes + the end-of-sequence id
blocks = tokens / 65
print(f"prefix: {entries} entries, {tokens} tokens, about {blocks:.0f} blocks of 65 per pass")
for d in runs:
    s = json.load(open(f"{d}/summary.json"))
    ev = [json.loads(l) for l in open(f"{d}/evals.jsonl") if l.strip()]
    n = len(ev)
    q = [ev[min(n - 1, max(0, round(n * k / 4) - 1))] for k in (1, 2, 3, 4)]
    best = min(ev, key=lambda e: e["loss"])
    late = [e["loss"] for e in ev if e["step"] >= s["steps"] / 2]
    d_ = [b - a for a, b in zip(late, late[1:])]
    swing = statistics.stdev(d_) / math.sqrt(2) if len(d_) > 2 else float("nan")
    # Passes from the tokens trained on (16 blocks of 65 a step), whatever the fresh count's
    # unit (blocks before 2026-12-03's sequence count, dictionary entries since).
    print(f"{d}: {s['steps']} steps, {s['steps'] * 16 / blocks:.1f} passes, {s['fresh']} fresh, "
          f"{s['train_seconds']:.0f} s training")
    print("   bits/byte at 1/4, 1/2, 3/4, end: " +
          ", ".join(f"{e['bits_per_byte']:.3f} (step {e['step']})" for e in q) +
          f"; best {best['bits_per_byte']:.3f} at step {best['step']}; "
          f"late swing of the loss {swing:.4f} nats")
PY
