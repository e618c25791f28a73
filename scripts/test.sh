#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   1. release build (with the trainer): all CTest tests (unit, CLI, install, HTTP, trainer)
#   2. ASan + UBSan build of the engine: the engine's unit tests
#   3. TSan build of the engine: the engine tests (threads everywhere; about a minute)
#   4. function size: clang-tidy's readability-function-size at 80 lines over src/
#      (scripts/function_size.sh, on the release build's compile_commands.json)
#   5. the fuzz targets, each for a bounded time
# Ends with one line "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
scripts/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
failed_steps=()
step() {  # step NAME COMMAND...: runs one test step, counts its CTest results
  local name=$1
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
}

step "release: all tests" ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 900

sanitizer_build() {  # sanitizer_build DIR SANITIZER
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDATAECHO_SANITIZE="$2" \
    -DDATAECHO_BUILD_TRAINER=OFF -DDATAECHO_BUILD_CLI=OFF -DDATAECHO_BUILD_BENCH=OFF -DDATAECHO_BUILD_PYTHON=OFF >/dev/null &&
    ninja -C "$1" -j"$JOBS"
}
step "ASan+UBSan build" sanitizer_build build-asan address
step "ASan+UBSan: engine tests" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS" -L engine --timeout 900
step "TSan build" sanitizer_build build-tsan thread
step "TSan: engine tests" env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$JOBS" -L engine --timeout 900
step "function size (clang-tidy, 80 lines)" scripts/function_size.sh build
if [ -x scripts/fuzz.sh ]; then
  step "fuzz targets (40 s each)" scripts/fuzz.sh 40
fi

echo
if [ ${#failed_steps[@]} -gt 0 ]; then
  echo "failed steps: ${failed_steps[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failed_steps[@]} -eq 0 ]
