#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ops_cpu.h"

#include <cmath>

#include "core/error.h"
#include "ops/quant.h"

namespace cactus {

namespace {

constexpr size_t kMaxHeadDim = 1024;

// q . k for a key row stored in half precision.
float dot_half(const float* q, const uint16_t* k, size_t n) {
    const float* table = half_to_float_table();
    float acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (size_t j = 0; j < 8; ++j) acc[j] += q[i + j] * table[k[i + j]];
    }
    float sum = 0.0f;
    for (; i < n; ++i) sum += q[i] * table[k[i]];
    for (float a : acc) sum += a;
    return sum;
}

constexpr size_t kGroup = 32;  // kKvGroup (src/kv/kv_options.h)

// q . k for an int8 key row with one scale per group of kGroup elements.
float dot_q8(const float* q, const int8_t* k, const float* k_scale, size_t n) {
    float sum = 0.0f;
    for (size_t g0 = 0; g0 < n; g0 += kGroup) {
        const size_t len = n - g0 < kGroup ? n - g0 : kGroup;
        float acc[8] = {};
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
            for (size_t j = 0; j < 8; ++j) acc[j] += q[g0 + i + j] * static_cast<float>(k[g0 + i + j]);
        }
        float part = 0.0f;
        for (; i < len; ++i) part += q[g0 + i] * static_cast<float>(k[g0 + i]);
        for (float a : acc) part += a;
        sum += part * k_scale[g0 / kGroup];
    }
    return sum;
}

// out += p * dequantized v row.
void accumulate_q8(float* out, float p, const int8_t* v, const float* v_scale, size_t n) {
    for (size_t g0 = 0; g0 < n; g0 += kGroup) {
        const size_t len = n - g0 < kGroup ? n - g0 : kGroup;
        const float w = p * v_scale[g0 / kGroup];
        for (size_t i = 0; i < len; ++i) out[g0 + i] += w * static_cast<float>(v[g0 + i]);
    }
}

void axpy_half(float* out, float p, const uint16_t* v, size_t n) {
    const float* table = half_to_float_table();
    for (size_t d = 0; d < n; ++d) out[d] += p * table[v[d]];
}

// The shared shape of both attention kernels: scores of the visible rows (score(r)), a softmax in
// scratch, then out = sum_r p_r * v_r (accumulate(r, p) adds one value row).
template <typename Score, typename Accumulate>
void attend(float* out, size_t head_dim_v, const int32_t* row_pos, size_t n_rows,
            const AttentionMask& mask, float* scratch, Score score, Accumulate accumulate) {
    float max = -INFINITY;
    for (size_t r = 0; r < n_rows; ++r) {
        scratch[r] = attention_row_visible(mask, row_pos[r]) ? score(r) : -INFINITY;
        max = scratch[r] > max ? scratch[r] : max;
    }
    for (size_t d = 0; d < head_dim_v; ++d) out[d] = 0.0f;
    if (max == -INFINITY) return;
    float sum = 0.0f;
    for (size_t r = 0; r < n_rows; ++r) {
        if (scratch[r] == -INFINITY) continue;
        scratch[r] = std::exp(scratch[r] - max);
        sum += scratch[r];
    }
    const float inv = 1.0f / sum;
    for (size_t r = 0; r < n_rows; ++r) {
        if (scratch[r] != -INFINITY) accumulate(r, scratch[r] * inv);
    }
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_generic() {
    static const AttentionRowKernels table = {"generic", dot_half, axpy_half, dot_q8, accumulate_q8};
    return table;
}

#if defined(__x86_64__) || defined(_M_X64)
static const AttentionRowKernels& pick_attention_row_kernels() {
    return cpu_features().avx2 ? attention_row_kernels_avx2() : attention_row_kernels_generic();
}
#else
static const AttentionRowKernels& pick_attention_row_kernels() { return attention_row_kernels_generic(); }
#endif

const AttentionRowKernels& attention_row_kernels() {
    static const AttentionRowKernels& chosen = pick_attention_row_kernels();
    return chosen;
}

void attention_head_q8(float* out, const float* q, const int8_t* k, size_t k_stride,
                       const float* k_scale, size_t k_scale_stride, const int8_t* v, size_t v_stride,
                       const float* v_scale, size_t v_scale_stride, const int32_t* row_pos,
                       size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                       const AttentionMask& mask, float* scratch) {
    const AttentionRowKernels& rows = attention_row_kernels();
    attend(out, head_dim_v, row_pos, n_rows, mask, scratch,
           [&](size_t r) { return rows.dot_q8(q, k + r * k_stride, k_scale + r * k_scale_stride, head_dim) * scale; },
           [&](size_t r, float p) {
               rows.axpy_q8(out, p, v + r * v_stride, v_scale + r * v_scale_stride, head_dim_v);
           });
}

void attention_head(float* out, const float* q, const uint16_t* k, size_t k_stride,
                    const uint16_t* v, size_t v_stride, const int32_t* row_pos, size_t n_rows,
                    size_t head_dim, size_t head_dim_v, float scale, const AttentionMask& mask,
                    float* scratch) {
    // Like the KV rows, the query and the attention weights are rounded to f16 (as llama.cpp's
    // f16 KV path does), so both engines see the same products.
    const AttentionRowKernels& rows = attention_row_kernels();
    const float* table = half_to_float_table();
    float q_half[kMaxHeadDim];
    CACTUS_ASSERT(head_dim <= kMaxHeadDim);
    for (size_t d = 0; d < head_dim; ++d) q_half[d] = table[fp32_to_fp16(q[d])];
    attend(out, head_dim_v, row_pos, n_rows, mask, scratch,
           [&](size_t r) { return rows.dot_f16(q_half, k + r * k_stride, head_dim) * scale; },
           [&](size_t r, float p) {
               rows.axpy_f16(out, table[fp32_to_fp16(p)], v + r * v_stride, head_dim_v);
           });
}

}  // namespace cactus
