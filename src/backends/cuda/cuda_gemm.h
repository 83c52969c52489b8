#pragma once
// Prompt products of quantized weights on the f16 tensor cores through cuBLAS (cuda_blas.h): W is
// dequantized to f16 in chunks of rows (its values are dequantize_row_ref's, rounded to f16), x is
// rounded to f16 once per product after a power-of-two scale that puts its largest value in [2^14, 2^15), and
// cublasGemmEx sums in f32. Unlike cuda_mmq.h's tiles, x is not rounded as the CPU's vec_dot_type
// rounds it: each term carries about 2^-11 relative error from the two f16 roundings (the CPU's
// int8 rounding of x carries up to 2^-8 of its block's largest value). Plain device pointers, work
// enqueued on the stream.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backends/cuda/cuda_blas.h"
#include "core/dtype.h"

namespace cactus {
namespace cuda {

// Weight types this path dequantizes (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K).
bool gemm_f16_supported(DType type);
// Bytes of the scratch one product needs for x [n, n_in] (the scale, x in f16, a chunk of W in f16).
size_t gemm_f16_scratch_bytes(size_t n, size_t n_in, size_t n_out);
// y [n, n_out] = x [n, n_in] W^T (accumulate: y += x W^T), W [n_out, n_in] of `type` in rows of
// row_bytes. scratch: gemm_f16_scratch_bytes(n, n_in, n_out), 256-byte aligned. False, enqueuing nothing,
// for a type this path does not take.
bool gemm_f16(cudaStream_t s, Blas& blas, float* y, const void* w, DType type, size_t row_bytes, const float* x,
              size_t n, size_t n_in, size_t n_out, bool accumulate, void* scratch);

// The same for F16 weights (the encoders'), which need no dequantizing but keep f32 accuracy: x is
// split under the same scale into two f16 parts, x / scale = hi + lo (hi = f16(x / scale), lo =
// f16 of the rest), and two cublasGemmEx sum W hi + W lo in f32. x so keeps about 22 significant
// bits, as cuda_mmq.h's tf32 tiles (x split in two tf32 values) keep them, and each term is off by
// about 2^-21 of |w x| instead of 2^-10. scratch: gemm_split_scratch_bytes(n, n_in), 256-byte
// aligned.
size_t gemm_split_scratch_bytes(size_t n, size_t n_in);
void gemm_f16_weights(cudaStream_t s, Blas& blas, float* y, const void* w, size_t row_bytes, const float* x, size_t n,
                      size_t n_in, size_t n_out, bool accumulate, void* scratch);

}  // namespace cuda
}  // namespace cactus
