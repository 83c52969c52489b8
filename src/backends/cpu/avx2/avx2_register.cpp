#include "backends/cpu/avx2/avx2_kernels.h"

namespace cactus {

void register_avx2_kernels(CpuKernels& t) { t.isa_name = "avx2"; }

}  // namespace cactus
