# Sourced by the by-hand transformers cross-checks (scripts/check_*_transformers.sh; never in CI).
# torch_venv [vision]: makes or reuses $CACTUS_TORCH_VENV (~/.cache/cactus/torch-venv: torch +
#   transformers from PyPI, ~5.6 GB) and sets $venv; "vision" adds Pillow and torchvision (without
#   its dependencies, so the venv's torch stays).
# llama_sdist: finds llama.cpp's converter in the llama-cpp-python 0.3.36 sdist (downloaded once
#   into the cache, or $CACTUS_LLAMA_SDIST: an unpacked one to use) and sets $sdist.
torch_venv() {
  venv=${CACTUS_TORCH_VENV:-$HOME/.cache/cactus/torch-venv}
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -c "import torch, transformers, safetensors, numpy" 2>/dev/null ||
    "$venv/bin/pip" install -q --disable-pip-version-check torch transformers safetensors numpy sentencepiece
  if [ "${1:-}" = vision ]; then
    "$venv/bin/python" -c "import PIL" 2>/dev/null || "$venv/bin/pip" install -q --disable-pip-version-check pillow
    "$venv/bin/python" -c "import torchvision" 2>/dev/null ||
      "$venv/bin/pip" install -q --disable-pip-version-check --no-deps torchvision
  fi
}

llama_sdist() {
  local root=$HOME/.cache/cactus/llama-cpp-sdist
  sdist=${CACTUS_LLAMA_SDIST:-$root/llama_cpp_python-0.3.36}
  if [ ! -f "$sdist/vendor/llama.cpp/convert_hf_to_gguf.py" ]; then
    mkdir -p "$root"
    "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$root" llama-cpp-python==0.3.36
    tar -C "$root" -xzf "$root"/llama_cpp_python-0.3.36.tar.gz
    sdist=$root/llama_cpp_python-0.3.36
  fi
}
