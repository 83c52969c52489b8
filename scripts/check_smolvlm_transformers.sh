#!/usr/bin/env bash
# One-off: SmolVLM's (idefics3) image path against Hugging Face transformers
# (scripts/check_smolvlm_transformers.py says how). Uses the torch venv of
# scripts/check_lfm2_transformers.sh (~5.6 GB; never in CI) plus torchvision and Pillow
# (transformers' Idefics3ImageProcessor resizes with torchvision, Idefics3ImageProcessorPil with
# Pillow; torchvision installed without dependencies so the venv's torch stays) and the
# llama-cpp-python 0.3.36 sdist for the converter (CACTUS_LLAMA_SDIST: an unpacked one to use), and the oracle
# venv for libmtmd.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv=${CACTUS_TORCH_VENV:-$HOME/.cache/cactus/torch-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import torch, transformers, safetensors, numpy" 2>/dev/null ||
  "$venv/bin/pip" install -q --disable-pip-version-check torch transformers safetensors numpy sentencepiece
"$venv/bin/python" -c "import PIL" 2>/dev/null || "$venv/bin/pip" install -q --disable-pip-version-check pillow
"$venv/bin/python" -c "import torchvision" 2>/dev/null ||
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps torchvision
sdist_root=$HOME/.cache/cactus/llama-cpp-sdist
sdist=${CACTUS_LLAMA_SDIST:-$sdist_root/llama_cpp_python-0.3.36}
if [ ! -f "$sdist/vendor/llama.cpp/convert_hf_to_gguf.py" ]; then
  mkdir -p "$sdist_root"
  "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$sdist_root" llama-cpp-python==0.3.36
  tar -C "$sdist_root" -xzf "$sdist_root"/llama_cpp_python-0.3.36.tar.gz
fi
[ -x "$repo/build/bin/vision_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_smolvlm_transformers.py" --sdist "$sdist" --build "${BUILD_DIR:-$repo/build}"
