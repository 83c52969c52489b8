#pragma once
// Optimised attention over the KV cache's f16, int8 or f32 rows. Same math as attention_head_ref /
// attention_head_q8_ref / attention_head_f32_ref (src/ops/ops_ref.h); tested against them in
// tests/kv/ and tests/models/.
//
// attention_group runs the n_q query heads of one token that share a KV head (GQA) together: the
// visible rows are found once, and each key / value row is loaded (and converted) once for all of
// them. Every head's output is bit for bit what a call with that head alone gives.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/ops_ref.h"

namespace cactus {

// Per-thread scratch of attention (grows to the largest call, then never allocates again).
class AttentionWorkspace {
public:
    void reserve(size_t n_q, size_t n_rows, size_t head_dim);
    float* scores() { return scores_.data(); }       // [n_q, n_rows]
    uint32_t* row_ids() { return row_ids_.data(); }  // [n_rows]
    float* queries() { return q_.data(); }           // [n_q, head_dim]

private:
    std::vector<float> scores_;
    std::vector<uint32_t> row_ids_;
    std::vector<float> q_;
};

// n_q queries [n_q, head_dim] (q_stride floats apart) and their outputs [n_q, head_dim_v].
struct AttentionQueries {
    const float* q;
    size_t q_stride;
    float* out;
    size_t out_stride;
    size_t n_q;
};

// n_rows physical rows, their logical positions (-1 = empty) and the query token's mask.
struct AttentionShape {
    const int32_t* row_pos;  // [n_rows]
    size_t n_rows;
    size_t head_dim;
    size_t head_dim_v;
    float scale;
    AttentionMask mask;
};

// Rows of one KV head: element strides between rows (and between rows' scale groups for int8).
struct KvRowsF16 {
    const uint16_t* k;
    size_t k_stride;
    const uint16_t* v;
    size_t v_stride;
};

struct KvRowsQ8 {
    const int8_t* k;
    size_t k_stride;
    const float* k_scale;
    size_t k_scale_stride;
    const int8_t* v;
    size_t v_stride;
    const float* v_scale;
    size_t v_scale_stride;
};

struct KvRowsF32 {
    const float* k;
    size_t k_stride;
    const float* v;
    size_t v_stride;
};

// f16 rows: the queries and the attention weights are rounded to f16 (as llama.cpp's f16 KV path);
// int8 and f32 rows: both stay f32.
void attention_group(const AttentionQueries& q, const KvRowsF16& kv, const AttentionShape& shape,
                     AttentionWorkspace& ws);
void attention_group(const AttentionQueries& q, const KvRowsQ8& kv, const AttentionShape& shape,
                     AttentionWorkspace& ws);
void attention_group(const AttentionQueries& q, const KvRowsF32& kv, const AttentionShape& shape,
                     AttentionWorkspace& ws);

// One head (n_q = 1), with the reference functions' argument lists.
void attention_head(float* out, const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                    const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                    const AttentionMask& mask, AttentionWorkspace& ws);
void attention_head_q8(float* out, const float* q, const int8_t* k, size_t k_stride, const float* k_scale,
                       size_t k_scale_stride, const int8_t* v, size_t v_stride, const float* v_scale,
                       size_t v_scale_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                       float scale, const AttentionMask& mask, AttentionWorkspace& ws);
void attention_head_f32(float* out, const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride,
                        const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v, float scale,
                        const AttentionMask& mask, AttentionWorkspace& ws);

}  // namespace cactus
