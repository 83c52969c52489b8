#pragma once
#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Fills every entry of the table with the scalar reference kernels.
void register_generic_kernels(CpuKernels& table);

}  // namespace cactus
