#!/usr/bin/env bash
# The engine tests under TSan, run N times in a row with `stress-ng --cpu 2` beside them
# (the bar: 50 consecutive runs without a failure). Stops at the first failed run and
# keeps its log. Needs the TSan build of scripts/test.sh (build-tsan) and Debian's
# stress-ng. Not part of CI: a run takes 2-5 minutes on 2 cores, 50 of them hours.
#   scripts/tsan_stress.sh [N] [LOG_DIR]     (default 50, results/tsan_stress_<date>)
# One line per run ("run 7: passed in 251 s, load 4.1"), then a summary line; LOG_DIR
# gets every run's ctest output and summary.txt.
#
# Resumable, also on another machine: run it again with the same LOG_DIR (committed) and
# it goes on from the next run, as long as the code under test is the same. That is
# named in summary.txt's first line as "code <commit>", the last commit that changed
# src, include, tests, cmake or CMakeLists.txt, and a tree with uncommitted changes there
# is refused. A LOG_DIR whose streak ended in a failure is not resumed: start a new one.
# Each resumed part adds a line with its date, commit and machine.
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
UNDER_TEST=(src include tests cmake CMakeLists.txt)
git diff --quiet HEAD -- "${UNDER_TEST[@]}" || {
  echo "tsan_stress: uncommitted changes under ${UNDER_TEST[*]}: commit them first" >&2
  exit 1
}
code=$(git log -1 --format=%h -- "${UNDER_TEST[@]}")
machine="$(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
mkdir -p "$LOG"
passed=0
if [[ -f $LOG/summary.txt ]]; then
  recorded=$(sed -n '1s/.*, code \([0-9a-f]*\).*/\1/p' "$LOG/summary.txt")
  [[ -n $recorded && $recorded == "$code" ]] || {
    echo "tsan_stress: $LOG was run on code ${recorded:-(not recorded)}, this tree's is $code: start a new LOG_DIR" >&2
    exit 1
  }
  ! grep -q FAILED "$LOG/summary.txt" || {
    echo "tsan_stress: $LOG's streak ended in a failure: start a new LOG_DIR" >&2
    exit 1
  }
  passed=$(grep -c '^run [0-9]*: passed' "$LOG/summary.txt" || true)
  sed -i '/^tsan_stress: /d' "$LOG/summary.txt"
  echo "# resumed after run $passed, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), $machine" >>"$LOG/summary.txt"
else
  echo "# scripts/tsan_stress.sh $N, commit $(git rev-parse --short HEAD), code $code, $(date -u +%FT%TZ), $machine, stress-ng --cpu 2" >"$LOG/summary.txt"
fi
stress-ng --cpu 2 --timeout 0 --quiet &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null || true' EXIT
for i in $(seq $((passed + 1)) "$N"); do
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
