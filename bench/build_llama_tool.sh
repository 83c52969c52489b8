#!/usr/bin/env bash
# Builds one of llama.cpp's programs once, from the llama.cpp sources vendored in the
# llama-cpp-python sdist (the same version as our test oracle), and caches the binary under
# $CACTUS_LLAMA_TOOLS_DIR (default ~/.cache/cactus/llama-tools). Prints its path.
#   bench/build_llama_tool.sh llama-bench|llama-server|llama-speculative-simple|llama-completion
# llama-speculative-simple and llama-completion are the speculative and plain decoding peers of
# bench/compare_spec.py.
# LLAMA_BENCH_ISA=native (default: every extension of this CPU) or avx2 (AVX, AVX2, FMA, F16C only:
# the x86 CPUs without AVX-512, to compare with cactus under CACTUS_CPU_ISA=avx2).
# The binaries are benchmark peers only: never committed or shipped.
set -euo pipefail
TOOLS="llama-bench, llama-server, llama-speculative-simple, llama-completion"
TOOL=${1:?usage: build_llama_tool.sh llama-bench|llama-server|llama-speculative-simple|llama-completion}
case "$TOOL" in
  llama-bench | llama-server | llama-speculative-simple | llama-completion) ;;
  *) echo "build_llama_tool: unknown tool '$TOOL' ($TOOLS)" >&2; exit 2 ;;
esac
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE_DIR=${CACTUS_LLAMA_TOOLS_DIR:-$HOME/.cache/cactus/llama-tools}
ISA=${LLAMA_BENCH_ISA:-native}
case "$ISA" in
  # native on x86-64 without AMX: llama.cpp's AMX matmul built by GCC 12 dies of SIGILL (its tile
  # configuration is compiled away; scripts/setup_oracle.sh).
  native) ISA_FLAGS=(-DGGML_NATIVE=ON)
          if [ "$(uname -m)" = x86_64 ]; then
            ISA_FLAGS+=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                        "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
          fi
          SUFFIX="" ;;
  avx2) ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF); SUFFIX="-avx2" ;;
  *) echo "build_llama_tool: unknown LLAMA_BENCH_ISA '$ISA' (native, avx2)" >&2; exit 2 ;;
esac
BIN="$CACHE_DIR/bin-$VERSION$SUFFIX/$TOOL"
JOBS=${CACTUS_BUILD_JOBS:-$(nproc)}
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

# One build tree per ISA, kept, so the second tool reuses the first one's objects.
WORK="$CACHE_DIR/work-$VERSION$SUFFIX"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  rm -rf "$WORK" && mkdir -p "$WORK"
  echo "build_llama_tool: fetching the llama-cpp-python $VERSION sdist" >&2
  python3 -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$WORK" >&2
  tar -xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
  [ -f "$SRC/CMakeLists.txt" ] || { echo "build_llama_tool: no vendor/llama.cpp in the sdist" >&2; exit 1; }
fi
echo "build_llama_tool: building $TOOL with $JOBS jobs (several minutes)" >&2
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_EXAMPLES=ON -DBUILD_SHARED_LIBS=OFF "${ISA_FLAGS[@]}" >&2
cmake --build "$WORK/build" --target "$TOOL" -j "$JOBS" >&2
mkdir -p "$(dirname "$BIN")"
cp "$WORK/build/bin/$TOOL" "$BIN"
echo "$BIN"
