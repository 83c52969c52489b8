#pragma once
// Row primitives of attention, one implementation per ISA, chosen once (attention_cpu.cpp).
// Rows are f16, int8 with one f32 scale per group of 32 elements (kKvGroup), or f32.
//
// Multi-query forms: n_q queries that share the keys and values (the heads of one KV group) over a
// list of row ids; k / v / scales of row id r start at r * stride.
//   dots:       scores[j * ld + i] = q_j . k_{rows[i]}                   (j < n_q, i < n_rows)
//   accumulate: out_j[d] += sum_i p[j * ld + i] * v_{rows[i]}[d], adding the rows in list order
// with q_j = q + j * q_stride and out_j = out + j * out_stride. Every (query, row) pair gets bit for
// bit the result of n_q = 1 and a one-row list, so grouping queries never changes a number.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cactus {

struct QueryBlock {
    const float* q;  // [n_q, q_stride]
    size_t q_stride;
    size_t n_q;
};

struct OutputBlock {
    float* out;  // [n_q, out_stride]
    size_t out_stride;
    size_t n_q;
};

struct WeightBlock {
    const float* p;  // [n_q, ld]: p[j * ld + i] weights row rows[i] for query j
    size_t ld;
};

struct RowList {
    const uint32_t* rows;  // [n_rows] row ids, in the order they are summed
    size_t n_rows;
};

struct AttentionRowKernels {
    const char* isa_name;
    // dst[i] = src[i] in IEEE half precision (round to nearest even), as fp32_to_fp16 (src/ops/quant.h).
    void (*to_half)(uint16_t* dst, const float* src, size_t n);
    // dst[i] = src[i] rounded to the nearest half-precision value (dst may be src).
    void (*round_half)(float* dst, const float* src, size_t n);
    // s[i] = exp(scale * s[i] - max) / sum over i < n (n >= 1), then rounded to f16 if round_half.
    void (*softmax)(float* s, size_t n, float scale, bool round_half);
    void (*dots_f16)(float* scores, size_t ld, const QueryBlock& q, const uint16_t* k, size_t k_stride,
                     const RowList& rows, size_t n);
    void (*accumulate_f16)(const OutputBlock& out, const WeightBlock& p, const uint16_t* v, size_t v_stride,
                           const RowList& rows, size_t n);
    void (*dots_q8)(float* scores, size_t ld, const QueryBlock& q, const int8_t* k, size_t k_stride,
                    const float* k_scale, size_t k_scale_stride, const RowList& rows, size_t n);
    void (*accumulate_q8)(const OutputBlock& out, const WeightBlock& p, const int8_t* v, size_t v_stride,
                          const float* v_scale, size_t v_scale_stride, const RowList& rows, size_t n);
    void (*dots_f32)(float* scores, size_t ld, const QueryBlock& q, const float* k, size_t k_stride,
                     const RowList& rows, size_t n);
    void (*accumulate_f32)(const OutputBlock& out, const WeightBlock& p, const float* v, size_t v_stride,
                           const RowList& rows, size_t n);
};

const AttentionRowKernels& attention_row_kernels_generic();
const AttentionRowKernels& attention_row_kernels_avx2();    // x86-64 only (avx2/attention_avx2.cpp)
const AttentionRowKernels& attention_row_kernels_avx512();  // x86-64 only (avx512/attention_avx512.cpp)
const AttentionRowKernels& attention_row_kernels_neon();    // aarch64 only (neon/attention_neon.cpp)
// Every table this CPU can run, generic first, then by width (tests; cpu_dispatch.cpp).
std::vector<const AttentionRowKernels*> attention_row_tables();
// The best table for this CPU (chosen once).
const AttentionRowKernels& attention_row_kernels();

}  // namespace cactus
