#include "backends/cpu/avx512/avx512_kernels.h"

namespace cactus {

void register_avx512_kernels(CpuKernels& t) { t.isa_name = "avx512"; }

}  // namespace cactus
