// NEON kernels with the ARMv8.2 dot product (sdot): 16 signed byte products summed into 4 int32
// lanes in one instruction. Compiled with -march=armv8.2-a+dotprod+fp16 (CMakeLists.txt); used only
// when cpu_features().neon_dotprod says the CPU has it.
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/neon/neon_kernels.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

inline int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }

#include "backends/cpu/neon/neon_quant_kernels.inl"

}  // namespace

void register_neon_dotprod_kernels(CpuKernels& t) {
    t.isa_name = "neon_dotprod";
    set_neon_entries(t);
}

}  // namespace cactus
