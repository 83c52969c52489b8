#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` once, from the llama.cpp sources vendored in the
# llama-cpp-python sdist (the same version as our test oracle), and caches the binary under
# $CACTUS_LLAMA_BENCH_DIR (default ~/.cache/cactus/llama-bench). Prints the binary's path.
# LLAMA_BENCH_ISA=native (default: every extension of this CPU) or avx2 (AVX, AVX2, FMA, F16C only:
# the x86 CPUs without AVX-512, to compare with cactus under CACTUS_CPU_ISA=avx2).
# The binary is a benchmark peer only: it is never committed or shipped.
set -euo pipefail
LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE_DIR=${CACTUS_LLAMA_BENCH_DIR:-$HOME/.cache/cactus/llama-bench}
ISA=${LLAMA_BENCH_ISA:-native}
case "$ISA" in
  native) ISA_FLAGS=(-DGGML_NATIVE=ON); SUFFIX="" ;;
  avx2) ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF); SUFFIX="-avx2" ;;
  *) echo "build_llama_bench: unknown LLAMA_BENCH_ISA '$ISA' (native, avx2)" >&2; exit 2 ;;
esac
BIN="$CACHE_DIR/bin-$LLAMA_CPP_PYTHON_VERSION$SUFFIX/llama-bench"
JOBS=${CACTUS_BUILD_JOBS:-$(nproc)}

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE_DIR"
WORK="$CACHE_DIR/work-$LLAMA_CPP_PYTHON_VERSION$SUFFIX"
rm -rf "$WORK"
mkdir -p "$WORK"
echo "build_llama_bench: fetching the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist" >&2
python3 -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  echo "build_llama_bench: no vendor/llama.cpp in the sdist" >&2
  exit 1
fi
echo "build_llama_bench: building llama-bench with $JOBS jobs (a few minutes)" >&2
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF "${ISA_FLAGS[@]}" -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$WORK/build" --target llama-bench -j "$JOBS" >&2
mkdir -p "$(dirname "$BIN")"
cp "$WORK/build/bin/llama-bench" "$BIN"
rm -rf "$WORK"
echo "$BIN"
