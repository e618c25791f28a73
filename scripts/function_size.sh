#!/usr/bin/env bash
# Function size: clang-tidy's readability-function-size with a threshold of 80 lines over
# every C++ file under src/ that the build compiles. A function past it is split along
# its seams or carries a NOLINTNEXTLINE(readability-function-size) comment that gives the
# reason. Also: a file of more than 600 lines says near its top why ("Why this file is
# long: ..."). The Python and shell code under scripts/function_size.py's PATHS is held to
# the same 80 and 600 lines by that script (a long function gives its reason in a
# `# function-size: REASON` comment above it).
#   scripts/function_size.sh [BUILD_DIR]     (default build: needs its compile_commands.json)
# Prints each finding and ends with "function_size: N findings"; exits 1 when N > 0.
# clang-tidy parses each file it checks (LibTorch's headers take seconds), so files in
# which no brace pair other than a namespace's or a class's spans more than 80 lines,
# and so no function can, are not given to it. Headers (src/ and include/) are held to
# that brace rule directly: clang-tidy reports only the files it is given.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
# Python and shell first (no build needed): its findings, then its count for the total.
script_out=$(/usr/bin/python3 scripts/function_size.py 2>&1)
script_findings=$(sed -n 's/^function_size.py: \([0-9]*\) findings.*/\1/p' <<<"$script_out")
printf '%s\n' "$script_out" | grep -v '^function_size.py: '
[ -n "$script_findings" ] || script_findings=1  # it failed: what it printed is the finding
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [ -z "$tidy" ]; then
  echo "function_size: clang-tidy not found"
  exit 1
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "function_size: no $build/compile_commands.json (configure the build first)"
  exit 1
fi
config='{CheckOptions: [{key: readability-function-size.LineThreshold, value: 80}]}'
# The files the build compiles that could hold a long function ("check FILE"), and
# headers that do hold a long brace pair ("FILE:LINE: ...").
mapfile -t scan < <(python3 - "$build/compile_commands.json" <<'PY'
import glob, json, os, re, subprocess, sys
compiled = {os.path.realpath(e["file"]) for e in json.load(open(sys.argv[1]))}
listed = subprocess.run(["git", "ls-files", "src/*.cc", "src/*.h", "include/*.h"],
                        capture_output=True, text=True)
# Outside a git checkout (a copy made by git archive): every such file there is.
tracked = listed.stdout.split() if listed.returncode == 0 else sorted(
    f for pattern in ("src/**/*.cc", "src/**/*.h", "include/**/*.h") for f in glob.glob(pattern, recursive=True))
strip = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|//.*')
for f in tracked:
    header = f.endswith(".h")
    if not header and os.path.realpath(f) not in compiled:
        continue
    opened, longest, at = [], 0, 0
    for n, line in enumerate(open(f, errors="replace")):
        code = strip.sub("", line)
        for c in code:
            if c == "{":
                scope = re.search(r"\b(namespace|class|struct|union|enum)\b[^;()]*$", code)
                opened.append((n, bool(scope)))
            elif c == "}" and opened:
                start, scope = opened.pop()
                if not scope and n - start > longest:
                    longest, at = n - start, start + 1
    if longest > 80:
        print(f"{f}:{at}: a brace pair of {longest} lines in a header" if header else "check " + f)
PY
)
files=()
header_findings=()
for line in "${scan[@]}"; do
  case "$line" in
    "check "*) files+=("${line#check }") ;;
    *) header_findings+=("$line") ;;
  esac
done
log=$(mktemp)
if [ ${#files[@]} -gt 0 ]; then
  # A file clang-tidy cannot parse is a finding too (it would hide a long function).
  printf '%s\n' "${files[@]}" |
    xargs -P "$(nproc)" -n 1 "$tidy" -quiet -checks='-*,readability-function-size' \
      -config="$config" -p "$build" 2>/dev/null |
    grep -E '^/.*(warning: .*\[readability-function-size\]|error: )' | sort -u >"$log"
fi
printf '%s\n' "${header_findings[@]}" | grep . >>"$log"
findings=$(wc -l <"$log")
cat "$log"
rm -f "$log"
# Long files: past 600 lines, the top (first 15 lines) says why.
long=0
sources=$(git ls-files 'src/*.cc' 'src/*.h' 2>/dev/null) || sources=$(find src -name '*.cc' -o -name '*.h' | sort)
for f in $sources; do
  n=$(wc -l <"$f")
  if [ "$n" -gt 600 ] && ! head -15 "$f" | grep -q "Why this file is long"; then
    echo "$f: $n lines, and its top does not say why (\"Why this file is long: ...\")"
    long=$((long + 1))
  fi
done
total=$((findings + long + script_findings))
echo "function_size: $total findings ($findings functions over 80 lines in ${#files[@]} files checked, $long long files; $script_findings in Python and shell)"
[ "$total" -eq 0 ]
