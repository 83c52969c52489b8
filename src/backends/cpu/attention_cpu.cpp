#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_pairs.h"
#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/quant.h"

namespace cactus {

namespace {

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

// q . k for an f32 key row (the summation order of dot_half).
float dot_f32(const float* q, const float* k, size_t n) {
    float acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (size_t j = 0; j < 8; ++j) acc[j] += q[i + j] * k[i + j];
    }
    float sum = 0.0f;
    for (; i < n; ++i) sum += q[i] * k[i];
    for (float a : acc) sum += a;
    return sum;
}

void axpy_f32(float* out, float p, const float* v, size_t n) {
    for (size_t d = 0; d < n; ++d) out[d] += p * v[d];
}

void axpy_half(float* out, float p, const uint16_t* v, size_t n) {
    const float* table = half_to_float_table();
    for (size_t d = 0; d < n; ++d) out[d] += p * table[v[d]];
}

// The generic multi-query forms: one row primitive call per (query, row) pair.
void dots_f16_generic(float* scores, size_t ld, const QueryBlock& q, const uint16_t* k, size_t k_stride,
                      const RowList& rows, size_t n) {
    dots_by_pair(scores, ld, q, rows, [&](const float* qj, uint32_t r) { return dot_half(qj, k + r * k_stride, n); });
}

void accumulate_f16_generic(const OutputBlock& out, const WeightBlock& p, const uint16_t* v, size_t v_stride,
                            const RowList& rows, size_t n) {
    accumulate_by_pair(out, p, rows, [&](float* o, float w, uint32_t r) { axpy_half(o, w, v + r * v_stride, n); });
}

void dots_f32_generic(float* scores, size_t ld, const QueryBlock& q, const float* k, size_t k_stride,
                      const RowList& rows, size_t n) {
    dots_by_pair(scores, ld, q, rows, [&](const float* qj, uint32_t r) { return dot_f32(qj, k + r * k_stride, n); });
}

void accumulate_f32_generic(const OutputBlock& out, const WeightBlock& p, const float* v, size_t v_stride,
                            const RowList& rows, size_t n) {
    accumulate_by_pair(out, p, rows, [&](float* o, float w, uint32_t r) { axpy_f32(o, w, v + r * v_stride, n); });
}

void dots_q8_generic(float* scores, size_t ld, const QueryBlock& q, const int8_t* k, size_t k_stride,
                     const float* k_scale, size_t k_scale_stride, const RowList& rows, size_t n) {
    dots_by_pair(scores, ld, q, rows, [&](const float* qj, uint32_t r) {
        return dot_q8(qj, k + r * k_stride, k_scale + r * k_scale_stride, n);
    });
}

void accumulate_q8_generic(const OutputBlock& out, const WeightBlock& p, const int8_t* v, size_t v_stride,
                           const float* v_scale, size_t v_scale_stride, const RowList& rows, size_t n) {
    accumulate_by_pair(out, p, rows, [&](float* o, float w, uint32_t r) {
        accumulate_q8(o, w, v + r * v_stride, v_scale + r * v_scale_stride, n);
    });
}

// The ids of the rows the mask lets the query see, in order of their positions (not of the rows):
// a sliding ring stores its rows rotated, by an amount that depends on the prefill chunk, and the
// softmax sum and the weighted value sum are summed in this order. Position order makes every
// result independent of where a row happens to be stored, so chunk sizes change no number.
RowList visible_rows(const AttentionShape& s, uint32_t* ids) {
    size_t n = 0;
    bool in_order = true;
    for (size_t r = 0; r < s.n_rows; ++r) {
        if (!attention_row_visible(s.mask, s.row_pos[r])) continue;
        in_order = in_order && (n == 0 || s.row_pos[ids[n - 1]] < s.row_pos[r]);
        ids[n++] = static_cast<uint32_t>(r);
    }
    if (!in_order) {
        const int32_t* pos = s.row_pos;
        std::sort(ids, ids + n,
                  [pos](uint32_t a, uint32_t b) { return pos[a] < pos[b] || (pos[a] == pos[b] && a < b); });
    }
    return {ids, n};
}

void to_half_generic(uint16_t* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void round_half_generic(float* dst, const float* src, size_t n) {
    const float* table = half_to_float_table();
    for (size_t i = 0; i < n; ++i) dst[i] = table[fp32_to_fp16(src[i])];
}

void softmax_generic(float* s, size_t n, float scale, bool round_half) {
    const float* table = half_to_float_table();
    float max = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        s[i] *= scale;
        max = s[i] > max ? s[i] : max;
    }
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        s[i] = std::exp(s[i] - max);
        sum += s[i];
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < n; ++i) s[i] = round_half ? table[fp32_to_fp16(s[i] * inv)] : s[i] * inv;
}

// The shared shape of every precision: visible rows, scores (dots), softmax, weighted value sum.
// ws is reserved by the caller for (n_q, n_rows, head_dim).
template <typename Dots, typename Accumulate>
void attend_group(const AttentionQueries& aq, const AttentionShape& s, AttentionWorkspace& ws, bool round_half,
                  Dots dots, Accumulate accumulate) {
    const RowList rows = visible_rows(s, ws.row_ids());
    for (size_t j = 0; j < aq.n_q; ++j) {
        for (size_t d = 0; d < s.head_dim_v; ++d) aq.out[j * aq.out_stride + d] = 0.0f;
    }
    if (rows.n_rows == 0) return;
    const size_t ld = rows.n_rows;
    float* scores = ws.scores();
    dots(scores, ld, rows);
    const AttentionRowKernels& rk = attention_row_kernels();
    for (size_t j = 0; j < aq.n_q; ++j) rk.softmax(scores + j * ld, rows.n_rows, s.scale, round_half);
    accumulate(OutputBlock{aq.out, aq.out_stride, aq.n_q}, WeightBlock{scores, ld}, rows);
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_generic() {
    static const AttentionRowKernels table = {
        "generic",        to_half_generic,        round_half_generic, softmax_generic,
        dots_f16_generic, accumulate_f16_generic, dots_q8_generic,    accumulate_q8_generic,
        dots_f32_generic, accumulate_f32_generic};
    return table;
}

void AttentionWorkspace::reserve(size_t n_q, size_t n_rows, size_t head_dim) {
    if (scores_.size() < n_q * n_rows) scores_.resize(n_q * n_rows);
    if (row_ids_.size() < n_rows) row_ids_.resize(n_rows);
    if (q_.size() < n_q * head_dim) q_.resize(n_q * head_dim);
}

void attention_group(const AttentionQueries& aq, const KvRowsF16& kv, const AttentionShape& s, AttentionWorkspace& ws) {
    // Like the KV rows, the queries and the attention weights are rounded to f16 (as llama.cpp's
    // f16 KV path does), so both engines see the same products.
    const AttentionRowKernels& rk = attention_row_kernels();
    ws.reserve(aq.n_q, s.n_rows, s.head_dim);
    float* q_half = ws.queries();  // [n_q, head_dim]
    for (size_t j = 0; j < aq.n_q; ++j) rk.round_half(q_half + j * s.head_dim, aq.q + j * aq.q_stride, s.head_dim);
    const QueryBlock qb = {q_half, s.head_dim, aq.n_q};
    attend_group(
        aq, s, ws, true,
        [&](float* scores, size_t ld, const RowList& rows) {
            rk.dots_f16(scores, ld, qb, kv.k, kv.k_stride, rows, s.head_dim);
        },
        [&](const OutputBlock& out, const WeightBlock& p, const RowList& rows) {
            rk.accumulate_f16(out, p, kv.v, kv.v_stride, rows, s.head_dim_v);
        });
}

void attention_group(const AttentionQueries& aq, const KvRowsQ8& kv, const AttentionShape& s, AttentionWorkspace& ws) {
    const AttentionRowKernels& rk = attention_row_kernels();
    ws.reserve(aq.n_q, s.n_rows, s.head_dim);
    const QueryBlock qb = {aq.q, aq.q_stride, aq.n_q};
    attend_group(
        aq, s, ws, false,
        [&](float* scores, size_t ld, const RowList& rows) {
            rk.dots_q8(scores, ld, qb, kv.k, kv.k_stride, kv.k_scale, kv.k_scale_stride, rows, s.head_dim);
        },
        [&](const OutputBlock& out, const WeightBlock& p, const RowList& rows) {
            rk.accumulate_q8(out, p, kv.v, kv.v_stride, kv.v_scale, kv.v_scale_stride, rows, s.head_dim_v);
        });
}

void attention_group(const AttentionQueries& aq, const KvRowsF32& kv, const AttentionShape& s, AttentionWorkspace& ws) {
    // Nothing is rounded: the queries and the weights keep f32 precision, like the rows.
    const AttentionRowKernels& rk = attention_row_kernels();
    ws.reserve(aq.n_q, s.n_rows, s.head_dim);
    const QueryBlock qb = {aq.q, aq.q_stride, aq.n_q};
    attend_group(
        aq, s, ws, false,
        [&](float* scores, size_t ld, const RowList& rows) {
            rk.dots_f32(scores, ld, qb, kv.k, kv.k_stride, rows, s.head_dim);
        },
        [&](const OutputBlock& out, const WeightBlock& p, const RowList& rows) {
            rk.accumulate_f32(out, p, kv.v, kv.v_stride, rows, s.head_dim_v);
        });
}

void attention_head_f32(float* out, const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride,
                        const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                        const AttentionMask& mask, AttentionWorkspace& ws) {
    const AttentionQueries aq = {q, head_dim, out, head_dim_v, 1};
    const KvRowsF32 kv = {k, k_stride, v, v_stride};
    attention_group(aq, kv, AttentionShape{row_pos, n_rows, head_dim, head_dim_v, scale, mask}, ws);
}

void attention_head_q8(float* out, const float* q, const int8_t* k, size_t k_stride, const float* k_scale,
                       size_t k_scale_stride, const int8_t* v, size_t v_stride, const float* v_scale,
                       size_t v_scale_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                       float scale, const AttentionMask& mask, AttentionWorkspace& ws) {
    const AttentionQueries aq = {q, head_dim, out, head_dim_v, 1};
    const KvRowsQ8 kv = {k, k_stride, k_scale, k_scale_stride, v, v_stride, v_scale, v_scale_stride};
    attention_group(aq, kv, AttentionShape{row_pos, n_rows, head_dim, head_dim_v, scale, mask}, ws);
}

void attention_head(float* out, const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                    const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                    const AttentionMask& mask, AttentionWorkspace& ws) {
    const AttentionQueries aq = {q, head_dim, out, head_dim_v, 1};
    const KvRowsF16 kv = {k, k_stride, v, v_stride};
    attention_group(aq, kv, AttentionShape{row_pos, n_rows, head_dim, head_dim_v, scale, mask}, ws);
}

}  // namespace cactus
