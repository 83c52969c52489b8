#!/usr/bin/env bash
# Prints the path of the unpacked llama-cpp-python 0.3.36 sdist from PyPI (llama.cpp's sources,
# its converter, and the models/ggml-vocab-*.gguf test vocabularies with their .inp/.out cases),
# downloading it once into ~/.cache/cactus/llama-cpp-sdist. Idempotent; only the path goes to
# stdout.
#   $CACTUS_LLAMA_SDIST  an unpacked sdist to use instead (checked, never downloaded into)
#   $PYTHON              the Python whose pip downloads it (default python3)
set -euo pipefail
VERSION=0.3.36
ROOT=$HOME/.cache/cactus/llama-cpp-sdist
MARKER=vendor/llama.cpp/src/llama-vocab.cpp

if [ -n "${CACTUS_LLAMA_SDIST:-}" ]; then
  if [ ! -f "$CACTUS_LLAMA_SDIST/$MARKER" ]; then
    echo "fetch_llama_sdist: CACTUS_LLAMA_SDIST=$CACTUS_LLAMA_SDIST has no $MARKER" >&2
    exit 1
  fi
  echo "$CACTUS_LLAMA_SDIST"
  exit 0
fi

SDIST=$ROOT/llama_cpp_python-$VERSION
if [ ! -f "$SDIST/$MARKER" ]; then
  mkdir -p "$ROOT"
  # Unpacked beside the cache and moved into place, so an interrupted run leaves no half tree.
  tmp=$(mktemp -d "$ROOT/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch_llama_sdist: downloading llama-cpp-python==$VERSION (sdist) into $ROOT" >&2
  "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$tmp" "llama-cpp-python==$VERSION" >&2
  tar -C "$tmp" -xzf "$tmp/llama_cpp_python-$VERSION.tar.gz"
  rm -rf "$SDIST"
  mv "$tmp/llama_cpp_python-$VERSION" "$SDIST"
fi
echo "$SDIST"
