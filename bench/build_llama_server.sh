#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` once, from the llama.cpp sources vendored in the
# llama-cpp-python sdist (the same version as our test oracle), and caches the binary under
# $CACTUS_LLAMA_SERVER_DIR (default ~/.cache/cactus/llama-server). Prints the binary's path.
# A benchmark peer for bench/compare_server.py only: never committed or shipped.
set -euo pipefail
LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE_DIR=${CACTUS_LLAMA_SERVER_DIR:-$HOME/.cache/cactus/llama-server}
BIN="$CACHE_DIR/bin-$LLAMA_CPP_PYTHON_VERSION/llama-server"
JOBS=${CACTUS_BUILD_JOBS:-$(nproc)}

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE_DIR"
WORK="$CACHE_DIR/work-$LLAMA_CPP_PYTHON_VERSION"
rm -rf "$WORK"
mkdir -p "$WORK"
echo "build_llama_server: fetching the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist" >&2
python3 -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  echo "build_llama_server: no vendor/llama.cpp in the sdist" >&2
  exit 1
fi
echo "build_llama_server: building llama-server with $JOBS jobs (several minutes)" >&2
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2
mkdir -p "$(dirname "$BIN")"
cp "$WORK/build/bin/llama-server" "$BIN"
rm -rf "$WORK"
echo "$BIN"
