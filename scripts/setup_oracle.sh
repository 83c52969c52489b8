#!/usr/bin/env bash
# Builds the test oracles once into a cached virtualenv ($CACTUS_ORACLE_DIR, default
# ~/.cache/cactus/oracle/venv): llama-cpp-python (compiles llama.cpp from its sdist, a few minutes
# on 2 cores), gguf, numpy, jinja2, pytest. Oracles are only for tests and benchmarks; never shipped.
set -euo pipefail
ORACLE_DIR=${CACTUS_ORACLE_DIR:-$HOME/.cache/cactus/oracle}
VENV="$ORACLE_DIR/venv"
STAMP="$VENV/.cactus-oracle-requirements"
REQUIREMENTS=(llama-cpp-python==0.3.36 gguf==0.19.0 numpy jinja2==3.1.6 pytest matplotlib openai==3.57.0 ollama==0.6.3 pillow==13.0.0 jsonschema==4.23.0 anthropic==2.17.0)

CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_OPENMP=OFF"
# llama.cpp 0.3.36's AMX matmul, built by Debian 12's GCC 12 on a CPU with AMX tiles, dies of
# SIGILL at its first tilezero (seen on a Xeon with AMX int8 in tests/models/test_model_oracle.py): GCC 12 drops the stores to a
# local tile configuration before LDTILECFG (src/backends/cpu/amx/amx_kernels.cpp met the same), so
# no tile is configured. The oracle is built without the AMX extensions (its AVX-512 kernels).
if [ "$(uname -m)" = x86_64 ]; then
  CMAKE_ARGS="$CMAKE_ARGS '-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'"
  CMAKE_ARGS="$CMAKE_ARGS '-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'"
fi
BUILD_KEY="${REQUIREMENTS[*]} | $CMAKE_ARGS"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$BUILD_KEY" ]; then
  exit 0
fi
mkdir -p "$ORACLE_DIR"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
echo "setup_oracle: installing ${REQUIREMENTS[*]} into $VENV (llama-cpp-python compiles llama.cpp: a few minutes)" >&2
# --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS, it would bring back an older build.
export CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
"$VENV/bin/pip" install --disable-pip-version-check --no-cache-dir -q "${REQUIREMENTS[@]}"
if [ -f "$STAMP" ]; then  # a venv of other requirements or flags: build llama.cpp again with these
  "$VENV/bin/pip" install --disable-pip-version-check --no-cache-dir -q --force-reinstall --no-deps "${REQUIREMENTS[0]}"
fi
"$VENV/bin/python" -c "import llama_cpp, gguf, jinja2, numpy, pytest, matplotlib, openai, ollama, jsonschema, anthropic"
echo "$BUILD_KEY" > "$STAMP"
