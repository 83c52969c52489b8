#pragma once
#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Replace the entries NEON accelerates (compiled only on aarch64). register_neon_kernels needs only
// the ASIMD every aarch64 CPU has; register_neon_dotprod_kernels needs cpu_features().neon_dotprod.
void register_neon_kernels(CpuKernels& table);
void register_neon_dotprod_kernels(CpuKernels& table);

}  // namespace cactus
