#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a consumer project against it.
set -euo pipefail
BUILD=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" > "$tmp/install.log"
# The trainer's library is not installed, so neither are its headers.
if [[ -e "$tmp/prefix/include/dataecho/train" ]]; then
  echo "consumer: include/dataecho/train installed without dataecho_train" >&2
  exit 1
fi
# The README's C++ snippet as written, in a main of its own (its #include lines above
# it), built against the installed library and run on shards named as it names them.
cp -r "$SRC" "$tmp/src"
readme="$SRC/../../README.md"
awk '/^```cpp$/ { on = 1; next } /^```$/ { if (on) exit } on' "$readme" >"$tmp/snippet.txt"
[[ -s "$tmp/snippet.txt" ]] || { echo "consumer: no C++ snippet in $readme" >&2; exit 1; }
{
  grep '^#include' "$tmp/snippet.txt"
  echo "int main() {"
  grep -v '^#include' "$tmp/snippet.txt"
  echo "  return 0;"
  echo "}"
} >"$tmp/src/readme_snippet.cc"
cmake -S "$tmp/src" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
ninja -C "$tmp/build" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/consumer"
fashion=/usr/share/datasets/fashion-mnist
mkdir -p "$tmp/run"
"$BUILD/bin/dataecho" convert --images "$fashion/train-images-idx3-ubyte.gz" --labels "$fashion/train-labels-idx1-ubyte.gz" \
  --to tfrecord --out "$tmp/run/shards" --name train --shards 8 --limit 2048 >/dev/null
(cd "$tmp/run" && "$tmp/build/readme_snippet") || { echo "consumer: the README's C++ snippet failed" >&2; exit 1; }
echo "consumer: the README's C++ snippet built and ran"
