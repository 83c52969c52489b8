#!/usr/bin/env bash
# Cross-compiles the kernels and their tests (tests/ops) for aarch64 and runs them under qemu-user:
# first on a CPU with the dot product (QEMU_CPU=max: the neon_dotprod table must be chosen), then on a
# Cortex-A72 (no dotprod: the plain neon table must be chosen and must not use sdot).
# Needs: g++-aarch64-linux-gnu qemu-user googletest (apt). Build dir: build-aarch64 (or $1).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build-aarch64}"
jobs="${JOBS:-2}"
sysroot=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja; do
    command -v "$tool" >/dev/null || { echo "test_aarch64: $tool not found (apt-get install g++-aarch64-linux-gnu qemu-user)" >&2; exit 2; }
done

start=$SECONDS
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$repo/cmake/aarch64-toolchain.cmake" -DCACTUS_KERNELS_ONLY=ON >/dev/null
ninja -C "$build" -j"$jobs" test_ops
echo "test_aarch64: built in $((SECONDS - start)) s"

# The plain NEON kernels must be base ARMv8 only: no sdot/udot in their object.
neon_obj="$(find "$build" -name 'neon_kernels.cpp.o' | head -n1)"
if [[ -z "$neon_obj" ]]; then echo "test_aarch64: neon_kernels.cpp.o not built" >&2; exit 1; fi
if aarch64-linux-gnu-objdump -d "$neon_obj" | grep -qE '\s(sdot|udot)\s'; then
    echo "test_aarch64: the plain NEON object uses the dot product instruction" >&2; exit 1
fi

# run_on CPU EXPECTED_TABLES [gtest args...]: runs test_ops under qemu and checks the table list.
run_on() {
    local cpu="$1" expected="$2"; shift 2
    local log; log="$(mktemp)"
    local t0=$SECONDS status=0
    QEMU_CPU="$cpu" qemu-aarch64 -L "$sysroot" "$build/bin/test_ops" --gtest_brief=1 "$@" | tee "$log" || status=$?
    local tables; tables="$(grep -o '^kernel tables:.*' "$log" || true)"
    rm -f "$log"
    echo "test_aarch64: QEMU_CPU=$cpu: ${tables:-no table line} ($((SECONDS - t0)) s, exit $status)"
    if [[ $status -ne 0 ]]; then echo "test_aarch64: tests failed on $cpu" >&2; exit 1; fi
    if [[ "$tables" != "kernel tables: $expected" ]]; then
        echo "test_aarch64: on $cpu expected 'kernel tables: $expected'" >&2; exit 1
    fi
}

run_on max "generic neon neon_dotprod"
# Without dotprod: the kernel tables, the activations, attention rows and dense GEMM (base ARMv8).
run_on cortex-a72 "generic neon" --gtest_filter='CpuKernels.*:Activations.*:DenseGemm.*:AttentionRows.*'
echo "test_aarch64: all passed in $((SECONDS - start)) s"
