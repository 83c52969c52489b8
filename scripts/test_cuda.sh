#!/usr/bin/env bash
# Builds (when it can) and runs every GPU test in one go, for one device call:
#   scripts/test_cuda.sh [BUILD_DIR]
# On a machine with the build dependencies it configures BUILD_DIR (default build-cuda) with
# CACTUS_CUDA=ON for sm_90 and builds test_backends and the CLI; otherwise (the device image has
# nvcc but not the project's -dev packages) set CACTUS_PREBUILT to a folder holding test_backends
# and cactus built elsewhere with the same flags (see docs/CUDA.md, "Running on the device").
# Real models are read from $CACTUS_MODELS (default ~/.cache/cactus/models); missing ones skip.
# Then: the op suite on cuda:0 (tests/backends/test_backend_ops.cpp, the same file CI runs on the CPU;
# a skipped GPU instance is a failure here), the rest of test_backends (the fault hook, the model
# tests), and cactus bench on cuda and cpu.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build-cuda}"
bin="${CACTUS_PREBUILT:-}"
if [[ -z "$bin" ]]; then
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCACTUS_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
    ninja -C "$build" -j"${JOBS:-$(nproc)}" test_backends cactus_cli
    bin="$build/bin"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

status=0
suite_log="$(mktemp)"
"$bin/test_backends" --gtest_filter='Devices/BackendOps.*/cuda_0' 2>&1 | tee "$suite_log" || status=1
if grep -q '\[  SKIPPED \]' "$suite_log" || ! grep -q '\[  PASSED  \]' "$suite_log"; then
    echo "test_cuda: the op suite did not run on cuda:0 (see the skip reason above)" >&2
    status=1
fi
rm -f "$suite_log"
"$bin/test_backends" --gtest_filter='-Devices/BackendOps.*' || status=1

models="${CACTUS_MODELS:-$HOME/.cache/cactus/models}"
for m in smollm2-135m gemma3-270m; do
    [[ -f "$models/$m.gguf" ]] || { echo "test_cuda: $models/$m.gguf missing, no benchmark"; continue; }
    for device in cuda cpu; do
        "$bin/cactus" bench "$models/$m.gguf" --device "$device" -p 512 -n 128 -r 3 || status=1
    done
done
exit "$status"
