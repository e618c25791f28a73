"""The package's metadata agrees with itself: one version (CMakeLists.txt's project()),
and docs/python.md names the Debian 12 runtime packages a wheel needs (setup.py's list,
which scripts/fresh_check.sh --only wheel installs on a minimal root). A copy of the
package with the plugins beside its extension, as a wheel has them, loads them from
there."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

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
    for name in ("DEBIAN_SERVICE", "DEBIAN_SENTENCEPIECE"):
        m = re.search(rf'^{name} = "([^"]+)"', (ROOT / "setup.py").read_text(), re.M)
        assert m and f"apt-get install {m.group(1)}" in docs, name


def _plugins() -> List[Path]:
    """The plugins of the build the package comes from: its python_plugins.txt (the
    package is the build's python/dataecho), else those beside an installed package's
    extension."""
    package = Path(de.__file__).parent
    listing = package.parents[1] / "python_plugins.txt"
    if listing.is_file():
        return [Path(line.split(" ", 1)[1]) for line in listing.read_text().splitlines() if line.strip()]
    return sorted(package.glob("libdataecho_*.so"))


def test_a_copied_package_loads_the_plugins_beside_its_extension(tmp_path):
    # As in a wheel: the paths the build compiled in exist here too, so the plugins
    # mapped into the process show which copy was loaded.
    plugins = _plugins()
    if not any(p.name == "libdataecho_grpc.so" for p in plugins):
        pytest.skip("this build has no gRPC plugin")
    copy = tmp_path / "dataecho"
    shutil.copytree(Path(de.__file__).parent, copy, ignore=shutil.ignore_patterns("libdataecho_*.so"))
    for p in plugins:
        shutil.copyfile(p, copy / p.name)
    (tmp_path / "in.txt").write_text("hello\n")
    script = """
import dataecho as de
for call in (lambda: de.service_status("127.0.0.1:9", timeout_s=1),
             lambda: next(iter(de.text("in.txt").map("tokenize", tokenizer="sentencepiece",
                                                     model="none.model").build(as_numpy=True)))):
    try:
        call()
    except de.Error as e:
        print(e)
print(*sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libdataecho_" in l}), sep="\\n")
"""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATAECHO_GRPC_PLUGIN", "DATAECHO_SENTENCEPIECE_PLUGIN")}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) >= 2, out
    assert "127.0.0.1:9" in lines[0] and "plugin" not in lines[0], lines[0]  # it got as far as calling
    assert "cannot load the SentencePiece model" in lines[1], lines[1]
    assert lines[2:] == sorted(str(copy / p.name) for p in plugins), out.stdout


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
