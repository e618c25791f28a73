#!/usr/bin/env bash
# The Python package's install step (cmake --install BUILD --component python), staged
# with DESTDIR: the installed package imports from another folder, without the build
# tree on the path, and runs a pipeline; the build's plugins are installed beside _core;
# a plain install of the C++ library to a prefix writes nothing Python.
#   install_test.sh BUILD PYTHON
set -euo pipefail
BUILD=$(realpath "$1")
PY=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
DESTDIR=$TMP/stage cmake --install "$BUILD" --component python >/dev/null
SITE=$(cd "$TMP/stage" && find . -name __init__.py -path "*/dataecho/*" -printf '%h\n' | head -1)
[[ -n $SITE ]] || { echo "no dataecho/__init__.py installed"; exit 1; }
while read -r _ plugin; do
  [[ -f "$TMP/stage/$SITE/${plugin##*/}" ]] || { echo "no ${plugin##*/} installed beside _core"; exit 1; }
done <"$BUILD/python_plugins.txt"
cd /
env -u PYTHONPATH PYTHONPATH="$TMP/stage/${SITE%/dataecho}" "$PY" -c '
import dataecho as de, sys
assert "/stage/" in de.__file__, de.__file__
b = next(de.range(6).batch(6).build())
assert b["value"].tolist() == list(range(6)), b
from dataecho import stats
assert stats.median_of([3, 1, 2]) == 2 and "/stage/" in stats.__file__, stats.__file__
print("installed package imports from", de.__file__)'
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
if find "$TMP/prefix" -path "*dataecho/__init__.py" | grep -q .; then
  echo "a plain install wrote the Python package"; exit 1
fi
