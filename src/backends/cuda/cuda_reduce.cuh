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

// Sum (is_max false) or maximum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. Every thread of the block must call it.
__device__ __forceinline__ float block_reduce(float v, bool is_max) {
    __shared__ float part[32];
    v = is_max ? warp_max(v) : warp_sum(v);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    __syncthreads();  // part[] may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x >> 5;
    const float none = is_max ? -INFINITY : 0.0f;
    const float mine = lane < n_warps ? part[lane] : none;
    return is_max ? warp_max(mine) : warp_sum(mine);
}

}  // namespace cuda
}  // namespace cactus
