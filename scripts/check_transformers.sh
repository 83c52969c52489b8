#!/usr/bin/env bash
# By hand: model families against Hugging Face transformers, layer by layer (scripts/check_transformers.py
# says how). Makes ~/.cache/cactus/torch-venv (torch + transformers from PyPI, ~5.6 GB; never in CI) and
# finds llama.cpp's converter in the llama-cpp-python 0.3.36 sdist (downloaded once into the cache).
#   scripts/check_transformers.sh [--family qwen3|lfm2|gemma4 ...] [--write-golden]
# BUILD_DIR (default build/) holds bin/model_probe.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/torch_check_env.sh"
torch_venv
llama_sdist
build="${BUILD_DIR:-$repo/build}"
[ -x "$build/bin/model_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_transformers.py" --sdist "$sdist" --build "$build" "$@"
