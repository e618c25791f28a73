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
cmake -S "$SRC" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
ninja -C "$tmp/build" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/consumer"
