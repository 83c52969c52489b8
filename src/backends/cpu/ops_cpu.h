#pragma once
// Optimised CPU kernels of the non-quantized transformer ops. Same math as the references in
// src/ops/ops_ref.h (tests/models/test_ops_cpu.cpp compares them on random inputs of odd sizes);
// float accumulation in several lanes instead of double, table-driven half conversion, RoPE
// angles computed once per token instead of once per head.
#include <cstddef>
#include <cstdint>

#include "ops/ops_ref.h"

namespace cactus {

void rms_norm(float* y, const float* x, const float* w, size_t n, float eps);
// Normalises each of n_rows consecutive rows of n elements with the same weight.
void rms_norm_rows(float* y, const float* x, const float* w, size_t n_rows, size_t n, float eps);

// Rotates one token's heads in place. x: [n_head, head_dim].
void rope(float* x, size_t n_head, size_t head_dim, int32_t pos, const RopeParams& params);
// The same in two steps, so q and k of one token share the angles: cs [n_rot] = (cos, sin) pairs
// of position pos, then the rotation of x [n_head, head_dim] by them.
void rope_cos_sin(float* cs, int32_t pos, const RopeParams& params);
void rope_rotate(float* x, size_t n_head, size_t head_dim, const float* cs, const RopeParams& params);

void softmax(float* x, size_t n);
void swiglu(float* out, const float* gate, const float* up, size_t n);
void geglu(float* out, const float* gate, const float* up, size_t n);

// Attention over the KV cache: attention_cpu.h.

// Half precision conversions through a 64k-entry table (built once, thread-safe).
float half_to_float(uint16_t h);
const float* half_to_float_table();  // [65536]
void float_to_half_row(uint16_t* dst, const float* src, size_t n);

// dst[i] += src[i] * scale.
void add_scaled(float* dst, const float* src, float scale, size_t n);

}  // namespace cactus
