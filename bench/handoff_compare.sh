#!/bin/bash
# Small elements across threads, two builds side by side: ops_bench's TextLines, Prefetch
# and MapIdentity rows (elements/s), run by two ops_bench binaries in alternation, the
# order swapped every round, so that both see the same machine. Writes each run's JSON,
# the machine's load beside it, and summary.json / summary.md: per row, each side's
# median over the rounds and the median and range of the per-round ratio B/A.
#
#   bench/handoff_compare.sh A_BIN B_BIN OUT_DIR [ROUNDS]
#
# A_BIN: ops_bench built from the commit before a change (git worktree + cmake, or a copy
# of build/bin/ops_bench kept from then); B_BIN: the one after. ROUNDS: 6 by default
# (about 1 minute per binary per round).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 A_BIN B_BIN OUT_DIR [ROUNDS]" >&2
  exit 2
fi
a_bin=$1 b_bin=$2 out=$3 rounds=${4:-6}
for b in "$a_bin" "$b_bin"; do
  [ -x "$b" ] || { echo "$0: $b is not an executable (build ops_bench: cmake --build build --target ops_bench)" >&2; exit 2; }
done
mkdir -p "$out"
filter='BM_Prefetch/|BM_MapIdentity|BM_TextLines'
run() {  # side round
  local side=$1 round=$2 bin=$a_bin
  [ "$side" = b ] && bin=$b_bin
  echo "[$(date -u +%T)] round $round/$rounds: $side ($bin), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  cut -d' ' -f1-3 /proc/loadavg >"$out/${side}_round${round}.load"
  "$bin" --benchmark_filter="$filter" --benchmark_min_time=0.5 --benchmark_repetitions=3 \
    --benchmark_out="$out/${side}_round${round}.json" --benchmark_out_format=json >/dev/null
}
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then run a "$round"; run b "$round"; else run b "$round"; run a "$round"; fi
done
python3 - "$out" "$rounds" "$a_bin" "$b_bin" <<'EOF'
import json, statistics, sys
out, rounds, a_bin, b_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def medians(path):  # row name -> median items/s of its repetitions
    rows = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            rows[b["run_name"]] = b["items_per_second"]
    return rows
a = [medians(f"{out}/a_round{r}.json") for r in range(1, rounds + 1)]
b = [medians(f"{out}/b_round{r}.json") for r in range(1, rounds + 1)]
summary = {"a": a_bin, "b": b_bin, "rounds": rounds, "rows": []}
lines = ["| row | A median, elements/s | B median, elements/s | B/A median [range] |",
         "|---|---|---|---|"]
fmt = lambda v: f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k"
for name in a[0]:
    av = [r[name] for r in a]; bv = [r[name] for r in b]
    ratios = [y / x for x, y in zip(av, bv)]
    row = {"row": name, "a": av, "b": bv, "a_median": statistics.median(av),
           "b_median": statistics.median(bv), "ratio_median": statistics.median(ratios),
           "ratio_min": min(ratios), "ratio_max": max(ratios)}
    summary["rows"].append(row)
    lines.append(f"| {name.replace('BM_', '').replace('/real_time', '')} | {fmt(row['a_median'])} | "
                 f"{fmt(row['b_median'])} | {row['ratio_median']:.2f} "
                 f"[{row['ratio_min']:.2f}-{row['ratio_max']:.2f}] |")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
