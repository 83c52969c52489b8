#pragma once
#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Replaces the entries this ISA accelerates (compiled only where the ISA exists; call only when
// cpu_features() says the CPU has it). decode_prefetch_l1: CpuFeatures::decode_prefetch_l1.
void register_avx512_kernels(CpuKernels& table, bool decode_prefetch_l1);

}  // namespace cactus
