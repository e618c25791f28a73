#!/usr/bin/env bash
# `dataecho pipe` and `import dataecho` load no gRPC library: the data service's gRPC
# lives in a plugin that only the service loads. Checked on what the dynamic loader
# loads (LD_DEBUG=files lists every object, dlopen'd ones too) and on the Python
# process's own memory map after it ran a pipeline.
#   no_grpc_test.sh DATAECHO_BIN PYTHON_PACKAGE_DIR
set -euo pipefail
BIN=$1
PYDIR=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$tmp/spec.json" <<'JSON'
{"seed": 5, "source": {"kind": "range", "count": 10},
 "stages": [{"op": "map", "fn": "square", "parallelism": 2}, {"op": "batch", "size": 4}]}
JSON
LD_DEBUG=files "$BIN" pipe "$tmp/spec.json" > "$tmp/out" 2> "$tmp/loads"
[ "$(wc -l < "$tmp/out")" -eq 3 ] || fail "pipe printed: $(cat "$tmp/out")"
grep -q "file=.*libc.so" "$tmp/loads" || fail "LD_DEBUG=files listed no libraries"
if grep -i "file=[^ ]*grpc" "$tmp/loads"; then fail "dataecho pipe loaded gRPC"; fi

if [ -n "$PYDIR" ] && [ -d "$PYDIR/dataecho" ]; then
  maps=$(PYTHONPATH=$PYDIR /usr/bin/python3 -c '
import dataecho
p = dataecho.range(10).map("square").batch(4).build()
assert sum(1 for _ in p) == 3
print(open("/proc/self/maps").read())')
  grep -q "dataecho/_core" <<<"$maps" || fail "the map shows no dataecho extension"
  if grep -i "grpc" <<<"$maps"; then fail "import dataecho loaded gRPC"; fi
fi
echo "no_grpc: ok"
