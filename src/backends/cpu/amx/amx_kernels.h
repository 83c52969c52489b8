#pragma once
#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Replaces the entries AMX accelerates in a copy of the AVX-512 VNNI table (compiled only for
// x86-64; call only when cpu_features() says the CPU has AMX int8 and Linux granted the tiles).
void register_amx_kernels(CpuKernels& table);

}  // namespace cactus
