#!/usr/bin/env bash
# Quick start: installs what is missing, builds, fetches the model and runs a chat completion.
# Usage: scripts/run.sh [MODEL] -p "PROMPT" [options of 'cactus run']   (default model: smollm2-135m)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
model=smollm2-135m
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  model=$1
  shift
fi
build/bin/cactus pull "$model" >&2
exec build/bin/cactus run "$model" "$@"
