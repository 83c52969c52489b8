#pragma once
#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Replaces the entries this ISA accelerates (compiled only where the ISA exists; call only when
// cpu_features() says the CPU has it).
void register_avx512_kernels(CpuKernels& table);

}  // namespace cactus
