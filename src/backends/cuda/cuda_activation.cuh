#pragma once
// The activations of gelu / glu and of the fused gated product (cuda_kernels.cu, cuda_gemv.cu):
// kind 0 SiLU, 1 GELU tanh, 2 GELU erf, 3 sigmoid (Activation's order).
#include <cuda_runtime.h>

namespace cactus {
namespace cuda {

__device__ __forceinline__ float activate(float x, int kind) {
    if (kind == 0) return x / (1.0f + expf(-x));
    if (kind == 1) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (kind == 3) return 1.0f / (1.0f + expf(-x));  // Activation::SIGMOID (glu only)
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

}  // namespace cuda
}  // namespace cactus
