#!/usr/bin/env bash
# `pip install .` as a Python user meets it: a fresh virtual environment that sees
# Debian's numpy and torch (--system-site-packages), pip from Debian's python3-pip,
# the checkout installed with --no-build-isolation and no package index. setup.py
# reuses BUILD (DATAECHO_CMAKE_BUILD_DIR), so only the dataecho_python target and the
# plugins are brought up to date. Then the installed package imports from outside the
# checkout, runs a pipeline, says its version and has BUILD's plugins beside _core; `pip uninstall` leaves nothing of dataecho in
# the environment.
#   venv_install_test.sh BUILD PYTHON
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(realpath "$1")
PY=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PYTHONPATH PIP_INDEX_URL PIP_EXTRA_INDEX_URL
"$PY" -m venv --system-site-packages "$TMP/venv"
VPY=$TMP/venv/bin/python
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
VERSION=$(sed -n 's/^project(dataecho VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
cd "$TMP"

t=$(date +%s)
DATAECHO_CMAKE_BUILD_DIR=$BUILD "$VPY" -m pip install -q --no-build-isolation --no-index "$SRC"
echo "pip install: $(($(date +%s) - t)) s"
show=$("$VPY" -m pip show dataecho)
grep -qx "Version: $VERSION" <<<"$show" || { echo "$show"; echo "pip show: not version $VERSION"; exit 1; }

"$VPY" - "$SITE" "$VERSION" "$BUILD/python_plugins.txt" <<'PY'
import importlib.metadata, os, sys
import dataecho as de
site, version = sys.argv[1], sys.argv[2]
for line in open(sys.argv[3]).read().splitlines():
    plugin = os.path.join(site, "dataecho", os.path.basename(line.split(" ", 1)[1]))
    assert os.path.isfile(plugin), f"no {plugin}"
assert de.__file__.startswith(site + "/dataecho/"), de.__file__
assert de._core.__file__.startswith(site + "/dataecho/_core."), de._core.__file__
assert de.__version__ == version == importlib.metadata.version("dataecho"), (de.__version__, version)
b = next(iter(de.range(6).batch(6).build()))
assert b["value"].tolist() == list(range(6)), b
from dataecho import stats
assert stats.__file__.startswith(site + "/dataecho/"), stats.__file__
assert stats.estimate_median([3.0, 1.0, 2.0], [False] * 3)["ci95"] == [1.0, 3.0]
print("venv package", de.__version__, "imports from", de.__file__)
PY

"$VPY" -m pip uninstall -q -y dataecho
left=$(find "$SITE" -maxdepth 1 -iname '*dataecho*')
[[ -z $left ]] || { echo "pip uninstall left: $left"; exit 1; }
# (a dataecho that scripts/bootstrap.sh --python put in /usr/local may still import)
"$VPY" - "$SITE" <<'PY'
import importlib.util, sys
spec = importlib.util.find_spec("dataecho")
assert spec is None or not spec.origin.startswith(sys.argv[1]), f"still imports from {spec.origin}"
PY
echo "pip uninstall removed dataecho from $SITE"
