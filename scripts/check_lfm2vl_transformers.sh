#!/usr/bin/env bash
# One-off: LFM2-VL's image path against Hugging Face transformers (scripts/check_lfm2vl_transformers.py
# says how). Uses the torch venv of scripts/check_lfm2_transformers.sh (~5.6 GB; never in CI) plus
# torchvision and Pillow (transformers' Lfm2VlImageProcessor resizes with torchvision; installed
# without dependencies so the venv's torch stays), the llama-cpp-python 0.3.36 sdist for the converter,
# and the oracle venv for libmtmd.
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
sdist=$sdist_root/llama_cpp_python-0.3.36
if [ ! -f "$sdist/vendor/llama.cpp/convert_hf_to_gguf.py" ]; then
  mkdir -p "$sdist_root"
  "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$sdist_root" llama-cpp-python==0.3.36
  tar -C "$sdist_root" -xzf "$sdist_root"/llama_cpp_python-0.3.36.tar.gz
fi
[ -x "$repo/build/bin/vision_probe" ] || "$repo/scripts/setup.sh"
exec "$venv/bin/python" "$repo/scripts/check_lfm2vl_transformers.py" --sdist "$sdist" --build "${BUILD_DIR:-$repo/build}"
