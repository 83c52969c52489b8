#!/usr/bin/env bash
# Quick start: installs what is missing, builds, fetches the model and runs a chat completion.
# Usage: scripts/run.sh [MODEL] -p "PROMPT" [options of 'cactus run']   (default model: qwen2.5-coder-0.5b)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
# the CLI's default model (kDefaultModel in src/engine/model_store.h; tests/e2e/test_first_run.py checks they agree)
model=qwen2.5-coder-0.5b
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  model=$1
  shift
fi
build/bin/cactus pull "$model" >&2
exec build/bin/cactus run "$model" "$@"
