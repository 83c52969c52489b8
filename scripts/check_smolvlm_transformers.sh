#!/usr/bin/env bash
# One-off: SmolVLM's (idefics3) image path against Hugging Face transformers
# (scripts/check_smolvlm_transformers.py says how). Uses the torch venv of
# scripts/check_transformers.sh (~5.6 GB; never in CI) plus torchvision and Pillow
# (transformers' Idefics3ImageProcessor resizes with torchvision, Idefics3ImageProcessorPil with
# Pillow; torchvision installed without dependencies so the venv's torch stays) and the
# llama-cpp-python 0.3.36 sdist for the converter (CACTUS_LLAMA_SDIST: an unpacked one to use), and the oracle
# venv for libmtmd.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/torch_check_env.sh"
torch_venv vision
llama_sdist
[ -x "$repo/build/bin/vision_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_smolvlm_transformers.py" --sdist "$sdist" --build "${BUILD_DIR:-$repo/build}"
