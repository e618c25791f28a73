"""The Python package's build for pip and `python3 -m build` (setuptools, from Debian).

The extension dataecho._core is the CMake target `dataecho_python`, the same target
`cmake --install build --component python` installs: this script configures CMake for
the interpreter running it (engine and extension only: no trainer, tool, tests or
benchmarks), builds that target and the plugins the configuration has (the build's
python_plugins.txt lists them: `dataecho_grpc`, the data service's transport, absent
without libgrpc++-dev; `dataecho_sentencepiece`, the SentencePiece tokenizer), and puts
the `_core*.so` and the plugins' `libdataecho_*.so` it made into the wheel, beside the
pure-Python files of python/dataecho: the engine looks for a plugin beside itself
before the paths it was built with. A wheel without the gRPC plugin says why in the
data service's error.

    DATAECHO_CMAKE_BUILD_DIR=build   reuse a configured build folder of this checkout
                                     (only `dataecho_python` and the plugins are brought
                                     up to date; it must have been configured for a
                                     Python with this interpreter's extension suffix)
    DATAECHO_CMAKE_ARGS="..."        more arguments for the CMake configure step
    CMAKE_BUILD_PARALLEL_LEVEL=N     build jobs (CMake's own variable)

Without DATAECHO_CMAKE_BUILD_DIR the build folder is build/pip-<python>/ of the tree
being built, kept between runs so that a second `pip install .` only relinks.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

# What a wheel built on Debian 12 needs on another Debian 12 machine, besides the wheel:
# the libraries the extension links (ldd), the interpreter it was built for and numpy.
# scripts/fresh_check.sh --only wheel installs exactly these (read from the wheel's
# metadata) on a minimal Debian 12 root; docs/python.md lists them too. The plugins need
# more, installed only where they are used: the data service's gRPC plugin
# libgrpc++1.51 (DEBIAN_SERVICE, which the check installs too, to call the service), the
# SentencePiece plugin libsentencepiece0 (DEBIAN_SENTENCEPIECE).
DEBIAN_RUNTIME = ("python3 python3-venv python3-numpy libcurl4 libarchive13 libturbojpeg0 "
                  "libjpeg62-turbo libspng0 zlib1g libprotobuf32")
DEBIAN_SERVICE = "libgrpc++1.51"
DEBIAN_SENTENCEPIECE = "libsentencepiece0"


def project_version() -> str:
    """The version of CMakeLists.txt's project(): the engine's, the package's and the wheel's."""
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*dataecho\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text)
    if not m:
        sys.exit("setup.py: no project(dataecho VERSION x.y.z) in CMakeLists.txt")
    return m.group(1)


def cached(build_dir: Path, name: str) -> str:
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return ""


def plugins(build_dir: Path) -> list[tuple[str, Path]]:
    """The plugins the configuration builds (target, file), from its python_plugins.txt."""
    listing = build_dir / "python_plugins.txt"
    if not listing.is_file():
        sys.exit(f"setup.py: no {listing}: configure {build_dir} again with this checkout's CMakeLists.txt")
    return [(target, Path(file)) for target, file in
            (line.split(" ", 1) for line in listing.read_text().splitlines() if line.strip())]


class CMakeBuild(build_ext):
    """Builds dataecho._core with CMake instead of compiling sources itself."""

    def build_extension(self, ext: Extension) -> None:
        reuse = os.environ.get("DATAECHO_CMAKE_BUILD_DIR")
        if reuse:
            build_dir = Path(reuse).resolve()
            if not (build_dir / "CMakeCache.txt").is_file():
                sys.exit(f"setup.py: DATAECHO_CMAKE_BUILD_DIR={reuse} is not a configured CMake build folder")
            home = cached(build_dir, "CMAKE_HOME_DIRECTORY")
            if Path(home).resolve() != ROOT:
                sys.exit(f"setup.py: {build_dir} is a build of {home}, not of {ROOT}")
        else:
            build_dir = ROOT / "build" / f"pip-{sys.implementation.cache_tag}"
            args = [
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}",
                "-DDATAECHO_BUILD_PYTHON=ON",
                "-DDATAECHO_BUILD_TRAINER=OFF",
                "-DDATAECHO_BUILD_CLI=OFF",
                "-DDATAECHO_BUILD_TESTS=OFF",
                "-DDATAECHO_BUILD_BENCH=OFF",
            ]
            if not (build_dir / "CMakeCache.txt").is_file() and shutil.which("ninja"):
                args += ["-G", "Ninja"]
            args += shlex.split(os.environ.get("DATAECHO_CMAKE_ARGS", ""))
            self.spawn(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + args)
        self.spawn(["cmake", "--build", str(build_dir), "--target", "dataecho_python"])
        built_plugins = plugins(build_dir)  # after the build: it configures again if needed
        if built_plugins:
            self.spawn(["cmake", "--build", str(build_dir), "--target"] + [t for t, _ in built_plugins])

        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "dataecho" / f"_core{suffix}"
        if not built.is_file():
            found = sorted(p.name for p in (build_dir / "python" / "dataecho").glob("_core*"))
            sys.exit(f"setup.py: {built} was not built (found {found}): the build folder was "
                     f"configured for another Python than {sys.executable}")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)
        for _, plugin in built_plugins:
            shutil.copyfile(plugin, dest.parent / plugin.name)


setup(
    version=project_version(),
    long_description=f"""\
dataecho: an input pipeline with data echoing for PyTorch training loops, a C++ engine
seen from Python (batches as torch tensors through DLPack, or numpy arrays without torch).

A wheel of dataecho is built for one platform: **CPython 3.11 on Debian 12 (bookworm),
x86_64**, with Debian's libraries. On another Debian 12 machine it needs these Debian
packages and nothing else (python3-torch for torch tensors):

    Debian 12 runtime packages: {DEBIAN_RUNTIME}

The data service (`dataecho.service_status`, the `service` source) also needs
`{DEBIAN_SERVICE}`, and SentencePiece tokenization `{DEBIAN_SENTENCEPIECE}`: install them
where those are used. Their plugins, `libdataecho_grpc.so` and
`libdataecho_sentencepiece.so`, are in the wheel beside `_core*.so` (a wheel built
without libgrpc++-dev has no gRPC plugin, and the data service's error says so):

    Debian 12 data service packages: {DEBIAN_SERVICE}
    Debian 12 SentencePiece packages: {DEBIAN_SENTENCEPIECE}

Install it into a virtual environment that sees Debian's numpy and torch:

    python3 -m venv --system-site-packages env
    env/bin/pip install dataecho-{project_version()}-cp311-cp311-linux_x86_64.whl
""",
    long_description_content_type="text/markdown",
    package_dir={"": "python"},
    packages=["dataecho"],
    package_data={"dataecho": ["py.typed", "*.pyi"]},
    zip_safe=False,
    ext_modules=[Extension("dataecho._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
