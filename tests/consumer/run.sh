#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a consumer project against it.
set -euo pipefail
BUILD=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" > "$tmp/install.log"
cmake -S "$SRC" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
ninja -C "$tmp/build" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/consumer"
