#pragma once
// Block formats of the GGML quantized types and their scalar reference kernels. These define the
// math: every optimised kernel (src/backends/cpu/<isa>/, CUDA) is tested against them.
//
// Dot products pair a weight row with an activation row quantized to the weight's `vec_dot_type`
// (Q8_0 / Q8_1 for the 32-element formats, Q8_K for K-quants, F32 for float weights).
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace cactus {

// The type activations are quantized to before a dot product with weights of `weight_type`.
DType vec_dot_type(DType weight_type);

// dst[0..n) = dequantized src; n is a multiple of the type's block size.
void dequantize_row_ref(DType type, float* dst, const void* src, size_t n);

// Quantizes n floats into blocks of `type` (supported: F32, F16, BF16, Q8_0, Q8_1, Q8_K and, for
// tests, every weight type listed in the issue); n is a multiple of the block size.
void quantize_row_ref(DType type, void* dst, const float* src, size_t n);

// Returns sum_i w[i] * x[i] for one row of n elements: w in `weight_type`, x in
// vec_dot_type(weight_type).
float vec_dot_ref(DType weight_type, const void* w, const void* x, size_t n);

// Scalar half-precision conversions (IEEE binary16 and bfloat16).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace cactus
