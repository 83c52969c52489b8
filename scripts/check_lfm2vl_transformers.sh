#!/usr/bin/env bash
# One-off: LFM2-VL's image path against Hugging Face transformers (scripts/check_lfm2vl_transformers.py
# says how). Uses the torch venv of scripts/check_transformers.sh (~5.6 GB; never in CI) plus
# torchvision and Pillow (transformers' Lfm2VlImageProcessor resizes with torchvision; installed
# without dependencies so the venv's torch stays), the llama-cpp-python 0.3.36 sdist for the converter,
# and the oracle venv for libmtmd.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/torch_check_env.sh"
torch_venv vision
llama_sdist
[ -x "$repo/build/bin/vision_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_lfm2vl_transformers.py" --sdist "$sdist" --build "${BUILD_DIR:-$repo/build}"
