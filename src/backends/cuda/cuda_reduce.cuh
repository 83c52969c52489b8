#pragma once
// Reductions over the 32 lanes of a warp (butterfly: every lane gets the result). Every lane must
// call them (full-mask shuffles).
#include <cuda_runtime.h>

namespace cactus {
namespace cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

}  // namespace cuda
}  // namespace cactus
