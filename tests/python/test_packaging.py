"""The package's metadata agrees with itself: one version (CMakeLists.txt's project()),
and docs/python.md names the Debian 12 runtime packages a wheel needs (setup.py's list,
which scripts/fresh_check.sh --only wheel installs on a minimal root)."""

import re
from pathlib import Path

import dataecho as de

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_cmake_project_version():
    m = re.search(r"project\(dataecho VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert m and de.__version__ == m.group(1) == de._core.__version__


def test_docs_name_the_wheel_runtime_packages():
    m = re.search(r'DEBIAN_RUNTIME = \(((?:"[^"]*"\s*)+)\)', (ROOT / "setup.py").read_text())
    assert m, "no DEBIAN_RUNTIME in setup.py"
    packages = "".join(re.findall(r'"([^"]*)"', m.group(1))).split()
    docs = (ROOT / "docs" / "python.md").read_text()
    assert f"apt-get install {' '.join(packages)}" in docs, packages


def test_the_package_carries_its_bytecode():
    # Built (CMake) and installed (cmake --install, pip) packages hold their compiled
    # modules, so that an interpreter that may not write bytecode (PYTHONDONTWRITEBYTECODE)
    # does not compile them at every import: that left 1.4 MiB behind (docs/text.md).
    import importlib.util

    from dataecho import _definition, _pipeline, _profile

    for mod in (de, _definition, _pipeline, _profile):
        cached = Path(importlib.util.cache_from_source(mod.__file__))
        assert cached.exists(), cached
        assert cached.stat().st_mtime >= Path(mod.__file__).stat().st_mtime, cached
