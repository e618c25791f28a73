#!/usr/bin/env bash
# The package's type check (CTest python_types): mypy on the dataecho package as built
# (build/python) and on experiments/archive.py, then mypy's stubtest of the C++
# extension's stubs (_core.pyi) against the extension itself. Settings: pyproject.toml,
# [tool.mypy].
#   tests/python/type_check.sh BUILD_DIR PYTHON
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
python=${2:-/usr/bin/python3}
cd "$build/python"
export MYPY_CACHE_DIR="$build/.mypy_cache"
"$python" -m mypy --config-file "$root/pyproject.toml" -p dataecho
# The archives of results/ (experiments/archive.py), from the repository's root.
(cd "$root" && "$python" -m mypy --config-file pyproject.toml experiments/archive.py)
"$python" -m mypy.stubtest --mypy-config-file "$root/pyproject.toml" \
  --allowlist "$root/tests/python/stubtest_allowlist.txt" dataecho._core
echo "type check: the package and the extension's stubs agree"
