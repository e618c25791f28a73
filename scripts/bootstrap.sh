#!/usr/bin/env bash
# Installs every Debian package dataecho needs (only those missing: seconds when all
# are there), then configures and builds into build/ (release, with the trainer).
#   scripts/bootstrap.sh            install + build
#   scripts/bootstrap.sh --deps     install only
#   scripts/bootstrap.sh --bench-deps   also PyTorch for Python (bench/dataloader_compare.sh), then build
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain (clang's sanitizer and libFuzzer runtimes are a separate package on Debian 12:
  # without libclang-rt-14-dev, scripts/fuzz.sh cannot link; scripts/fresh_check.sh checks
  # this whole list on a minimal Debian root)
  g++ cmake ninja-build pkg-config clang libclang-rt-14-dev time curl tar
  # engine
  nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libarchive-dev
  libprotobuf-dev protobuf-compiler libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libpng-dev zlib1g-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev nginx-light
  # trainer, data and plots
  libtorch-dev dataset-fashion-mnist gnuplot-nox
)

# Only for the side-by-side benchmark against PyTorch's DataLoader (large: ~70 packages).
if [ "${1:-}" = "--bench-deps" ]; then
  PACKAGES+=(python3-torch python3-torchvision)
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
[ "${1:-}" = "--deps" ] && exit 0

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$(nproc)"
echo "bootstrap: built build/bin/dataecho"
