#!/usr/bin/env bash
# Installs every Debian package dataecho needs (only those missing: seconds when all
# are there) and the S3 test server's npm packages (tests/s3/server), then configures and
# builds into build/ (release, with the trainer).
#   scripts/bootstrap.sh            install + build
#   scripts/bootstrap.sh --deps     install only
#   scripts/bootstrap.sh --bench-deps   also matplotlib's sample photograph and FFCV (bench/dataloader_compare.sh), then build
#   scripts/bootstrap.sh --list-packages   the package list (both), one a line
#   scripts/bootstrap.sh --python   install + build, then install the Python package into
#                                   /usr/bin/python3's site folder (import dataecho from anywhere);
#                                   a virtual environment uses pip instead (docs/python.md)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain (clang's sanitizer and libFuzzer runtimes are a separate package on Debian 12:
  # without libclang-rt-14-dev, scripts/fuzz.sh cannot link; scripts/fresh_check.sh checks
  # this whole list on a minimal Debian root)
  g++ cmake ninja-build pkg-config clang libclang-rt-14-dev time curl tar git
  # scripts/function_size.sh (clang-tidy) and scripts/check_commands.py (shfmt parses the
  # scripts to list the programs they call)
  clang-tidy shfmt
  # engine
  nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libarchive-dev
  libprotobuf-dev protobuf-compiler libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libpng-dev zlib1g-dev
  libsentencepiece-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev nginx-light openssl
  sentencepiece  # spm_train: the tokenize test trains a tiny model
  # trainer, data and plots
  libtorch-dev dataset-fashion-mnist gnuplot-nox dict-gcide
  # data-parallel training: c10d's Gloo backend in libtorch needs the Gloo headers
  libgloo-dev
  # scripts/netns_faults.sh: network namespaces, tbf shaping and nftables loss rules
  iproute2 nftables
  # the Python package (python/dataecho) and its tests, for Debian's /usr/bin/python3
  pybind11-dev python3-dev libdlpack-dev python3-numpy python3-torch python3-pytest
  # its type check (tests/python/type_check.sh: mypy and stubtest)
  python3-mypy
  # tests/python/test_files_source.py: the files source's ImageFolder order against torchvision's
  python3-torchvision
  # pip install . in a virtual environment and the wheel (pyproject.toml, setup.py)
  python3-setuptools python3-wheel python3-pip python3-venv python3-build
  # tests/s3: the S3 test server runs on Node.js (pinned by its lock file); boto3 uploads
  # the fixtures, so that a bug shared by writer and reader cannot hide
  # (ca-certificates: npm fetches them over TLS; nodejs only recommends it)
  nodejs ca-certificates python3-boto3
  # the data service's transport (gRPC's generic API, in a plugin loaded only when used)
  libgrpc++-dev
)

# Only for the side-by-side benchmark against PyTorch's DataLoader.
BENCH_PACKAGES=(
  python-matplotlib-data  # its sample photograph: bench/make_photos.py
  # the FFCV side (bench/ffcv_side.py): python3-ffcv 0.0.3 imports cv2 and numba, which
  # its package does not depend on
  python3-ffcv python3-opencv python3-numba
)
# Debian's npm only where no npm came with Node.js (nodesource's nodejs has its own and
# conflicts with Debian's npm package); once Debian's npm is installed it stays on the list,
# so that --list-packages says where the npm it installed comes from.
npm_path=$(command -v npm || true)
npm_owner=$([ -z "$npm_path" ] || dpkg -S "$npm_path" 2>/dev/null || true)
case "$npm_path:$npm_owner" in
  : | *:npm:*) PACKAGES+=(npm) ;;
esac
# Every package, one a line (scripts/check_commands.py reads it).
if [ "${1:-}" = "--list-packages" ]; then
  printf '%s\n' "${PACKAGES[@]}" "${BENCH_PACKAGES[@]}"
  exit 0
fi
if [ "${1:-}" = "--bench-deps" ]; then
  PACKAGES+=("${BENCH_PACKAGES[@]}")
  shift
fi
INSTALL_PYTHON=0
if [ "${1:-}" = "--python" ]; then
  INSTALL_PYTHON=1
  shift
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The S3 test server's npm packages (tests/s3/server), exactly those of its lock file, no
# install scripts run; again only when the lock file changes.
if ! cmp -s tests/s3/server/package-lock.json tests/s3/server/node_modules/.dataecho-lock; then
  echo "bootstrap: npm ci in tests/s3/server"
  # Node.js trusts only the certificates built into it; the system's store also holds a
  # site's own (a TLS-inspecting proxy's), which apt and curl already trust.
  NODE_EXTRA_CA_CERTS=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt} \
    npm ci --prefix tests/s3/server --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error
  cp tests/s3/server/package-lock.json tests/s3/server/node_modules/.dataecho-lock
fi
[ "${1:-}" = "--deps" ] && exit 0

# DATAECHO_BUILD_BENCH=OFF leaves the benchmarks out (scripts/test.sh: no test runs them);
# given each time, so that a build the test command configured gets them back here.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDATAECHO_BUILD_BENCH="${DATAECHO_BUILD_BENCH:-ON}" >/dev/null
ninja -C build -j"$(nproc)"
echo "bootstrap: built build/bin/dataecho"
if [ "$INSTALL_PYTHON" = 1 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO cmake --install build --component python
  (cd / && /usr/bin/python3 -c "import dataecho; print('bootstrap: installed', dataecho.__file__)")
fi
