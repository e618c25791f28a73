#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   1. installed programs: every program the scripts call comes from a package
#      scripts/bootstrap.sh installs (scripts/check_commands.py)
#   2. release build (with the trainer, without the benchmarks): all CTest tests (unit,
#      CLI, install, HTTP, trainer, Python, the experiments package's tests/experiments,
#      its type check in python_types, the demo on tiny budgets) but the namespace tests
#      (label `netns`)
#   3. ASan + UBSan build of the engine: the engine's unit tests
#   4. TSan build of the engine: the engine tests (threads everywhere; about a minute)
#   5. function size: clang-tidy's readability-function-size at 80 lines over src/ (on
#      the release build's compile_commands.json), and the same 80 lines for the Python
#      and shell code (scripts/function_size.sh, scripts/function_size.py)
#   6. the fuzz targets, each for a bounded time
# Ends with one line "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
START=$SECONDS
# Without the benchmarks (no test runs them; about 3 minutes of the 2 cores):
# scripts/bootstrap.sh and the bench/ scripts build them.
DATAECHO_BUILD_BENCH=OFF scripts/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }
timings=("bootstrap (install + release build): $((SECONDS - START)) s")

passed=0
failed=0
failed_steps=()
step() {  # step NAME COMMAND...: runs one test step, counts its CTest results
  local name=$1 began=$SECONDS
  shift
  echo "=== $name"
  local log
  log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(sed -n 's/.* tests passed, \([0-9]*\) tests failed out of \([0-9]*\)/\2 \1/p' "$log" | tail -1)
  if [ -n "$p" ]; then
    set -- $p
    passed=$((passed + $1 - $2))
    failed=$((failed + $2))
  elif [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
  fi
  if [ "$rc" -ne 0 ]; then
    failed_steps+=("$name")
    [ -z "$p" ] && failed=$((failed + 1))
  fi
  rm -f "$log"
  timings+=("$name: $((SECONDS - began)) s")
}

# ctest_retry [VAR=VALUE...] ARGS...: ctest ARGS (with --test-dir) in that environment;
# then the failed tests labelled `timing` (they still depend on real time:
# tests/CMakeLists.txt) once more, each named. A failure that repeats fails, and so does
# any other. Ends with a summary line of the two runs together for step().
ctest_retry() {
  while [[ $# -gt 0 && $1 == [A-Z_]*=* ]]; do
    export "${1?}"
    shift
  done
  local dir="" a prev="" rc=0
  for a in "$@"; do
    [ "$prev" = "--test-dir" ] && dir=$a
    prev=$a
  done
  ctest "$@" || rc=$?
  [ "$rc" -eq 0 ] || [ -z "$dir" ] && return "$rc"
  local failed timing retry=() other=0 total
  failed=$(sed 's/^[0-9]*://' "$dir/Testing/Temporary/LastTestsFailed.log" 2>/dev/null)
  timing=$(ctest --test-dir "$dir" -N -L timing | sed -n 's/^ *Test *#[0-9]*: //p')
  total=$(ctest "$@" -N | sed -n 's/^Total Tests: //p')
  while IFS= read -r a; do
    [ -z "$a" ] && continue
    if grep -qxF -- "$a" <<<"$timing"; then retry+=("$a"); else other=$((other + 1)); fi
  done <<<"$failed"
  [ ${#retry[@]} -eq 0 ] && return "$rc"
  echo "=== retry: ${#retry[@]} failed timing test(s) once more: ${retry[*]}"
  local still=0 regex
  regex="^($(printf '%s\n' "${retry[@]}" | sed 's/[][\.*^$+?(){}|/]/\\&/g' | paste -sd'|'))\$"
  ctest "$@" -R "$regex" || still=$?
  local left
  left=$(sed -n 's/^[0-9]*://p' "$dir/Testing/Temporary/LastTestsFailed.log" 2>/dev/null | grep -c . || true)
  [ "$still" -eq 0 ] && left=0
  echo "=== retry: $(( ${#retry[@]} - left )) passed on the retry, $left failed again"
  local bad=$((other + left))
  echo "after the retry: $(( (total - bad) * 100 / (total > 0 ? total : 1) ))% tests passed, $bad tests failed out of $total"
  [ "$bad" -eq 0 ]
}

# Every program the scripts call comes from a package scripts/bootstrap.sh installs
# (seconds): a machine with more installed by hand would hide a missing one.
step "installed programs (scripts/check_commands.py)" /usr/bin/python3 scripts/check_commands.py

# Not the namespace tests (label `netns`, scripts/netns_faults.sh): CI time is at its
# limit; they are run by hand for every change to the distributed or HTTP code.
step "release: all tests" ctest_retry --test-dir build --output-on-failure -j"$JOBS" --timeout 900 -LE netns

# -g1 (line tables): the sanitizers' reports still name each frame's function, file and
# line, and a file compiles in about 17% less CPU than with -g (measured 2026-12-02 on
# src/spec/pipeline_def.cc under ASan+UBSan at -O0). The layer libraries compile as
# unity batches (DATAECHO_UNITY_LAYERS): under ASan 57 s of wall time on 2 cores against
# 208 s file by file (measured 2026-12-02).
sanitizer_build() {  # sanitizer_build DIR SANITIZER
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDATAECHO_SANITIZE="$2" \
    -DDATAECHO_UNITY_LAYERS=ON \
    -DDATAECHO_BUILD_TRAINER=OFF -DDATAECHO_BUILD_CLI=OFF -DDATAECHO_BUILD_BENCH=OFF -DDATAECHO_BUILD_PYTHON=OFF >/dev/null &&
    ninja -C "$1" -j"$JOBS"
}
step "ASan+UBSan build" sanitizer_build build-asan address
step "ASan+UBSan: engine tests" ctest_retry ASAN_OPTIONS=detect_leaks=1 \
  "LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  --test-dir build-asan --output-on-failure -j"$JOBS" -L engine --timeout 900
step "TSan build" sanitizer_build build-tsan thread
step "TSan: engine tests" ctest_retry TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  --test-dir build-tsan --output-on-failure -j"$JOBS" -L engine --timeout 900
step "function size (80 lines: C++ by clang-tidy, Python, shell)" scripts/function_size.sh build
if [ -x scripts/fuzz.sh ]; then
  step "fuzz targets (20 s each)" scripts/fuzz.sh 20
fi

echo
echo "time per step (the whole run: $((SECONDS - START)) s):"
printf '  %s\n' "${timings[@]}"
if [ ${#failed_steps[@]} -gt 0 ]; then
  echo "failed steps: ${failed_steps[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failed_steps[@]} -eq 0 ]
