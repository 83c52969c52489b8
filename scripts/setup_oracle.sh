#!/usr/bin/env bash
# Builds the test oracles once into a cached virtualenv ($CACTUS_ORACLE_DIR, default
# ~/.cache/cactus/oracle/venv): llama-cpp-python (compiles llama.cpp from its sdist, a few minutes
# on 2 cores), gguf, numpy, jinja2, pytest. Oracles are only for tests and benchmarks; never shipped.
set -euo pipefail
ORACLE_DIR=${CACTUS_ORACLE_DIR:-$HOME/.cache/cactus/oracle}
VENV="$ORACLE_DIR/venv"
STAMP="$VENV/.cactus-oracle-requirements"
REQUIREMENTS=(llama-cpp-python==0.3.36 gguf==0.19.0 numpy jinja2==3.1.6 pytest matplotlib openai==3.57.0 ollama==0.6.3 pillow==13.0.0 jsonschema==4.23.0)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${REQUIREMENTS[*]}" ]; then
  exit 0
fi
mkdir -p "$ORACLE_DIR"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
echo "setup_oracle: installing ${REQUIREMENTS[*]} into $VENV (llama-cpp-python compiles llama.cpp: a few minutes)" >&2
CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_OPENMP=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$VENV/bin/pip" install --disable-pip-version-check -q "${REQUIREMENTS[@]}"
"$VENV/bin/python" -c "import llama_cpp, gguf, jinja2, numpy, pytest, matplotlib, openai, ollama, jsonschema"
echo "${REQUIREMENTS[*]}" > "$STAMP"
