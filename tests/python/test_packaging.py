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
