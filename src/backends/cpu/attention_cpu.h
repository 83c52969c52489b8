#pragma once
// Optimised attention kernels over int8 KV rows (the f16 one, attention_head, is in ops_cpu.h).
// Same math as attention_head_q8_ref (src/ops/ops_ref.h); tested against it in tests/kv/.
#include <cstddef>
#include <cstdint>

#include "ops/ops_ref.h"

namespace cactus {

// scratch: [n_rows] floats owned by the caller (no allocation here).
void attention_head_q8(float* out, const float* q, const int8_t* k, size_t k_stride,
                       const float* k_scale, size_t k_scale_stride, const int8_t* v, size_t v_stride,
                       const float* v_scale, size_t v_scale_stride, const int32_t* row_pos,
                       size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                       const AttentionMask& mask, float* scratch);

}  // namespace cactus
