#pragma once
// Per-type scalar reference kernels behind quant.h's type-dispatching entry points. The CPU kernel
// table (src/backends/cpu) uses them as its generic entries. n is always a multiple of the block
// size (checked by the dispatchers).
#include <cstddef>
#include <cstdint>

namespace cactus {
namespace ref {

// Round to nearest, ties to even (ggml's nearest_int); |x| must be below 2^22.
inline int nearest_int(float x) {
    float shifted = x + 12582912.f;
    int32_t bits;
    __builtin_memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

// ---- float formats ----
void dequantize_row_f32(float* dst, const void* src, size_t n);
void dequantize_row_f16(float* dst, const void* src, size_t n);
void dequantize_row_bf16(float* dst, const void* src, size_t n);
void quantize_row_f32(void* dst, const float* src, size_t n);
void quantize_row_f16(void* dst, const float* src, size_t n);
void quantize_row_bf16(void* dst, const float* src, size_t n);
float vec_dot_f32(const void* w, const void* x, size_t n);   // x: f32
float vec_dot_f16(const void* w, const void* x, size_t n);   // x: f32
float vec_dot_bf16(const void* w, const void* x, size_t n);  // x: f32

// ---- 32-element formats ----
void dequantize_row_q4_0(float* dst, const void* src, size_t n);
void dequantize_row_q4_1(float* dst, const void* src, size_t n);
void dequantize_row_q5_0(float* dst, const void* src, size_t n);
void dequantize_row_q5_1(float* dst, const void* src, size_t n);
void dequantize_row_q8_0(float* dst, const void* src, size_t n);
void dequantize_row_q8_1(float* dst, const void* src, size_t n);
void quantize_row_q4_0(void* dst, const float* src, size_t n);
void quantize_row_q4_1(void* dst, const float* src, size_t n);
void quantize_row_q5_0(void* dst, const float* src, size_t n);
void quantize_row_q5_1(void* dst, const float* src, size_t n);
void quantize_row_q8_0(void* dst, const float* src, size_t n);
void quantize_row_q8_1(void* dst, const float* src, size_t n);
float vec_dot_q4_0(const void* w, const void* x, size_t n);  // x: Q8_0
float vec_dot_q4_1(const void* w, const void* x, size_t n);  // x: Q8_1
float vec_dot_q5_0(const void* w, const void* x, size_t n);  // x: Q8_0
float vec_dot_q5_1(const void* w, const void* x, size_t n);  // x: Q8_1
float vec_dot_q8_0(const void* w, const void* x, size_t n);  // x: Q8_0

// ---- K-quants (256-element super-blocks) ----
void dequantize_row_q2_k(float* dst, const void* src, size_t n);
void dequantize_row_q3_k(float* dst, const void* src, size_t n);
void dequantize_row_q4_k(float* dst, const void* src, size_t n);
void dequantize_row_q5_k(float* dst, const void* src, size_t n);
void dequantize_row_q6_k(float* dst, const void* src, size_t n);
void dequantize_row_q8_k(float* dst, const void* src, size_t n);
void quantize_row_q2_k(void* dst, const float* src, size_t n);
void quantize_row_q3_k(void* dst, const float* src, size_t n);
void quantize_row_q4_k(void* dst, const float* src, size_t n);
void quantize_row_q5_k(void* dst, const float* src, size_t n);
void quantize_row_q6_k(void* dst, const float* src, size_t n);
void quantize_row_q8_k(void* dst, const float* src, size_t n);
float vec_dot_q2_k(const void* w, const void* x, size_t n);  // x: Q8_K
float vec_dot_q3_k(const void* w, const void* x, size_t n);  // x: Q8_K
float vec_dot_q4_k(const void* w, const void* x, size_t n);  // x: Q8_K
float vec_dot_q5_k(const void* w, const void* x, size_t n);  // x: Q8_K
float vec_dot_q6_k(const void* w, const void* x, size_t n);  // x: Q8_K

}  // namespace ref
}  // namespace cactus
