#!/usr/bin/env bash
# One-off: qwen3 against Hugging Face transformers (scripts/check_qwen3_transformers.py says how).
# Makes ~/.cache/cactus/torch-venv (torch + transformers from PyPI, ~5.6 GB; never in CI) and finds
# llama.cpp's converter in the llama-cpp-python 0.3.36 sdist (downloaded once into the cache).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/torch_check_env.sh"
torch_venv
llama_sdist
[ -x "$repo/build/bin/model_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_qwen3_transformers.py" --sdist "$sdist" --build "${BUILD_DIR:-$repo/build}"
