#!/usr/bin/env bash
# The engine tests under TSan, run N times in a row with `stress-ng --cpu 2` beside them
# (issue #43: 50 consecutive runs without a failure). Stops at the first failed run and
# keeps its log. Needs the TSan build of scripts/test.sh (build-tsan) and Debian's
# stress-ng. Not part of CI: a run takes 2-5 minutes on 2 cores, 50 of them hours.
#   scripts/tsan_stress.sh [N] [LOG_DIR]     (default 50, results/tsan_stress_<date>)
# One line per run ("run 7: passed in 251 s, load 4.1"), then a summary line; LOG_DIR
# gets every run's ctest output and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-50}
LOG=${2:-results/tsan_stress_$(date -u +%F)}
[[ -f build-tsan/CTestTestfile.cmake ]] || {
  echo "tsan_stress: no build-tsan (scripts/test.sh builds it)" >&2
  exit 1
}
command -v stress-ng >/dev/null || {
  echo "tsan_stress: stress-ng is missing (apt-get install stress-ng)" >&2
  exit 1
}
mkdir -p "$LOG"
stress-ng --cpu 2 --timeout 0 --quiet &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null || true' EXIT
commit=$(git rev-parse --short HEAD)
{
  echo "# scripts/tsan_stress.sh $N, commit $commit$(git diff --quiet HEAD -- src include tests || echo -dirty), $(date -u +%FT%TZ), $(nproc) CPUs, stress-ng --cpu 2"
} >"$LOG/summary.txt"
passed=0
for i in $(seq 1 "$N"); do
  began=$SECONDS
  if TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan -j"$(nproc)" -L engine --timeout 900 >"$LOG/run-$i.log" 2>&1; then
    passed=$((passed + 1))
    line="run $i: passed in $((SECONDS - began)) s, load $(cut -d' ' -f1 /proc/loadavg)"
    rm -f "$LOG/run-$i.log"  # a passing run's output says nothing the summary does not
  else
    line="run $i: FAILED in $((SECONDS - began)) s: $(sed -n 's/^[0-9]*://p' build-tsan/Testing/Temporary/LastTestsFailed.log | paste -sd' ') (log: $LOG/run-$i.log)"
  fi
  echo "$line" | tee -a "$LOG/summary.txt"
  [[ $line == *FAILED* ]] && break
done
echo "tsan_stress: $passed of $N consecutive runs passed" | tee -a "$LOG/summary.txt"
[[ $passed -eq $N ]]
