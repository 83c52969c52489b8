#pragma once
// Prompt products (n > kGemvMaxTokens tokens) as tiled tensor-core products (cuda_mmq.cu): int8
// for the quantized weights, tf32 for the float ones. Plain device pointers, work enqueued on the
// stream.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"

namespace cactus {
namespace cuda {

// Weight types with a tiled integer path (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K).
bool mmq_supported(DType type);
// Bytes of the scratch that holds x [n, n_in] rounded to int8 with its block scales.
size_t mmq_scratch_bytes(size_t n, size_t n_in);
// Token width of mmq's tiles: `tokens` 128 (CACTUS_CUDA_MMQ_TOKENS=128) takes the wide tiles; 0 or 64
// the 64-token ones (cuda_mmq.cu's tile_tokens says why). The width changes no result, bit for bit.
struct MmqTiling {
    int tokens = 0;
};
// y [n, n_out] = x [n, n_in] W^T, W [n_out, n_in] of `type` in rows of row_bytes. x is rounded
// once into `scratch` (mmq_scratch_bytes, 16-byte aligned) exactly as the CPU's vec_dot_type
// rounds it, then 64-row x 64- or 128-token tiles of y are products of int8 blocks on the tensor
// cores, each block's int32 sum scaled as the CPU's vec_dot scales it. Returns false, enqueuing
// nothing, when this path does not take the type or shapes; the caller then uses matmul.
bool mmq(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n, size_t n_in,
         size_t n_out, void* scratch, const MmqTiling& tiling);

// Float weights (F16, BF16, F32) for prompts: 64 x 64 tiles on the tf32 tensor cores, x (and F32
// weights) split into two tf32 parts each, so the result is the f32 product's up to summation
// order (relative error near 2^-22 per term). Any n_in. False, enqueuing nothing, for other types.
bool mmf_supported(DType type);
bool mmf(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n, size_t n_in,
         size_t n_out);

}  // namespace cuda
}  // namespace cactus
