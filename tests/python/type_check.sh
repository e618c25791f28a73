#!/usr/bin/env bash
# The package's type check (CTest python_types): mypy on the dataecho package as built
# (build/python) and on the experiments package, then mypy's stubtest of the C++
# extension's stubs (_core.pyi) against the extension itself. Settings: pyproject.toml,
# [tool.mypy].
#   tests/python/type_check.sh BUILD_DIR PYTHON
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
python=${2:-/usr/bin/python3}
cd "$build/python"
build_python=$PWD
export MYPY_CACHE_DIR="$build/.mypy_cache"
"$python" -m mypy --config-file "$root/pyproject.toml" -p dataecho
# The experiments package, from the repository's root, with the dataecho package as built.
(cd "$root" && MYPYPATH="$build_python" "$python" -m mypy --config-file pyproject.toml -p experiments)
"$python" -m mypy.stubtest --mypy-config-file "$root/pyproject.toml" \
  --allowlist "$root/tests/python/stubtest_allowlist.txt" dataecho._core
echo "type check: the package and the extension's stubs agree"
