#!/usr/bin/env bash
# Installs the Debian packages the build needs (only those missing) and builds cactus into build/.
# Usage: scripts/setup.sh            (Release build in build/)
#        BUILD_DIR=build-asan CMAKE_FLAGS="-DCACTUS_SANITIZE=ON" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (when installed) keys on paths relative to the checkout, so clean clones reuse objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1

packages=(build-essential cmake ninja-build pkg-config git python3 python3-pip python3-venv
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libssl-dev openssl libpcre2-dev libgtest-dev libgmock-dev
          libsndfile1-dev libsamplerate0-dev libkissfft-dev zlib1g-dev espeak-ng sox
          clang libclang-rt-14-dev g++-aarch64-linux-gnu qemu-user libstb-dev ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# xgrammar's C++ core (constrained decoding) is built from its PyPI sdist, kept in a git-ignored cache.
scripts/fetch_xgrammar.sh

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_FLAGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
