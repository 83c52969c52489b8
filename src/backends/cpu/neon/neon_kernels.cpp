// Plain NEON kernels: only the ASIMD every aarch64 CPU has (Cortex-A53, A72, ...). The byte dot
// product widens with smull and adds pairs with sadalp: no int16 stage can saturate, since
// |a * b| <= 128 * 128 fits int16 and the pair sums are already int32.
//
// Every file in this folder is compiled with -march=armv8.2-a+dotprod+fp16 for the dotprod tier;
// the pragma takes this file back to base ARMv8 so the compiler cannot slip sdot (or any other
// ARMv8.2 instruction) into code that must run on CPUs without it. (GCC; clang would need
// `#pragma clang attribute` instead.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("arch=armv8-a")
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/neon/neon_kernels.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

inline int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t first = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t second = vmull_high_s8(a, b);
    return vpadalq_s16(vpadalq_s16(acc, first), second);
}

#include "backends/cpu/neon/neon_quant_kernels.inl"

}  // namespace

void register_neon_kernels(CpuKernels& t) {
    t.isa_name = "neon";
    set_neon_entries(t);
}

}  // namespace cactus
