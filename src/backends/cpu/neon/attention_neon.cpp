// AArch64 ASIMD attention row primitives (see attention_rows.h). Each (query, row) pair runs one
// fixed instruction sequence (the multi-query forms loop over pairs), so grouping queries or rows
// never changes a bit. Half conversions use FCVTN / FCVTL (round to nearest even, as fp32_to_fp16);
// scalar tails are explicit fmas. Base ARMv8 (the pragma, as neon_kernels.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("arch=armv8-a")
#endif

#include <arm_neon.h>

#include <cmath>

#include "backends/cpu/attention_pairs.h"
#include "backends/cpu/attention_rows.h"
#include "backends/cpu/neon/exp_neon.h"
#include "backends/cpu/ops_cpu.h"

namespace cactus {

namespace {

constexpr size_t kGroup = 32;  // kKvGroup (src/kv/kv_options.h)

inline float32x4_t load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// Key and value rows are f16 (uint16_t) or f32 (float): 4 elements as floats, and one element.
inline float32x4_t load_row4(const uint16_t* p) { return load_f16(p); }
inline float32x4_t load_row4(const float* p) { return vld1q_f32(p); }
inline float row_element(uint16_t x) { return half_to_float(x); }
inline float row_element(float x) { return x; }

inline float32x4_t load_i8x4(const int8_t* p, size_t i) {  // elements i .. i + 3 of p
    int8_t b[8] = {p[i], p[i + 1], p[i + 2], p[i + 3], 0, 0, 0, 0};
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vld1_s8(b)))));
}

// Lanes [i, min(i + 4, n)) of s (the rest `fill`), and their store.
inline float32x4_t load_tail(const float* s, size_t i, size_t n, float fill) {
    float b[4];
    for (size_t l = 0; l < 4; ++l) b[l] = i + l < n ? s[i + l] : fill;
    return vld1q_f32(b);
}

inline void store_tail(float* s, size_t i, size_t n, float32x4_t v) {
    float b[4];
    vst1q_f32(b, v);
    for (size_t l = 0; l < 4 && i + l < n; ++l) s[i + l] = b[l];
}

inline float32x4_t round_to_half(float32x4_t x) { return vcvt_f32_f16(vcvt_f16_f32(x)); }

void to_half_row(uint16_t* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    if (i == n) return;
    uint16_t b[4];
    vst1_u16(b, vreinterpret_u16_f16(vcvt_f16_f32(load_tail(src, i, n, 0.0f))));
    for (size_t l = 0; i + l < n; ++l) dst[i + l] = b[l];
}

void round_half_row(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, round_to_half(vld1q_f32(src + i)));
    if (i < n) store_tail(dst, i, n, round_to_half(load_tail(src, i, n, 0.0f)));
}

void softmax(float* s, size_t n, float scale, bool round_half) {
    const float32x4_t vscale = vdupq_n_f32(scale);
    float32x4_t vmax = vdupq_n_f32(-INFINITY);
    for (size_t i = 0; i < n; i += 4) {
        const float32x4_t x = vmulq_f32(i + 4 <= n ? vld1q_f32(s + i) : load_tail(s, i, n, -INFINITY), vscale);
        store_tail(s, i, n, x);
        vmax = vmaxq_f32(vmax, x);
    }
    const float32x4_t vm = vdupq_n_f32(vmaxvq_f32(vmax));
    float32x4_t vsum = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < n; i += 4) {
        const float32x4_t e = exp_neon(vsubq_f32(i + 4 <= n ? vld1q_f32(s + i) : load_tail(s, i, n, -INFINITY), vm));
        store_tail(s, i, n, e);
        vsum = vaddq_f32(vsum, e);
    }
    const float32x4_t inv = vdupq_n_f32(1.0f / vaddvq_f32(vsum));
    for (size_t i = 0; i < n; i += 4) {
        float32x4_t p = vmulq_f32(i + 4 <= n ? vld1q_f32(s + i) : load_tail(s, i, n, 0.0f), inv);
        if (round_half) p = round_to_half(p);
        store_tail(s, i, n, p);
    }
}

// q . k over n elements of an f16 or f32 row: two 4-lane accumulators (even / odd chunks of 8),
// then the scalar tail.
template <class T>
float dot_row(const float* q, const T* k, size_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    size_t d = 0;
    for (; d + 8 <= n; d += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + d), load_row4(k + d));
        a1 = vfmaq_f32(a1, vld1q_f32(q + d + 4), load_row4(k + d + 4));
    }
    if (d + 4 <= n) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + d), load_row4(k + d));
        d += 4;
    }
    float sum = vaddvq_f32(vaddq_f32(a0, a1));
    for (; d < n; ++d) sum = std::fma(q[d], row_element(k[d]), sum);
    return sum;
}

// q . k for an int8 row with one scale per group of 32: per group a 4-lane sum, then * scale.
float dot_q8(const float* q, const int8_t* k, const float* k_scale, size_t n) {
    float sum = 0.0f;
    for (size_t g0 = 0; g0 < n; g0 += kGroup) {
        const size_t len = n - g0 < kGroup ? n - g0 : kGroup;
        float32x4_t acc = vdupq_n_f32(0.0f);
        size_t i = 0;
        for (; i + 4 <= len; i += 4) acc = vfmaq_f32(acc, vld1q_f32(q + g0 + i), load_i8x4(k, g0 + i));
        float part = vaddvq_f32(acc);
        for (; i < len; ++i) part = std::fma(q[g0 + i], static_cast<float>(k[g0 + i]), part);
        sum = std::fma(part, k_scale[g0 / kGroup], sum);
    }
    return sum;
}

// out[d] += w * v[d] over an f16 or f32 row (one fma per element).
template <class T>
void axpy_row(float* out, float w, const T* v, size_t n) {
    const float32x4_t vw = vdupq_n_f32(w);
    size_t d = 0;
    for (; d + 4 <= n; d += 4) vst1q_f32(out + d, vfmaq_f32(vld1q_f32(out + d), vw, load_row4(v + d)));
    for (; d < n; ++d) out[d] = std::fma(w, row_element(v[d]), out[d]);
}

void axpy_q8(float* out, float p, const int8_t* v, const float* v_scale, size_t n) {
    for (size_t g0 = 0; g0 < n; g0 += kGroup) {
        const size_t len = n - g0 < kGroup ? n - g0 : kGroup;
        const float w = p * v_scale[g0 / kGroup];
        const float32x4_t vw = vdupq_n_f32(w);
        size_t i = 0;
        for (; i + 4 <= len; i += 4) {
            float* o = out + g0 + i;
            vst1q_f32(o, vfmaq_f32(vld1q_f32(o), vw, load_i8x4(v, g0 + i)));
        }
        for (; i < len; ++i) out[g0 + i] = std::fma(w, static_cast<float>(v[g0 + i]), out[g0 + i]);
    }
}

// dots_f16 / accumulate_f16 (T = uint16_t) and dots_f32 / accumulate_f32 (T = float).
template <class T>
void dots(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows, size_t n) {
    dots_by_pair(scores, ld, q, rows, [&](const float* qj, uint32_t r) { return dot_row(qj, k + r * k_stride, n); });
}

template <class T>
void accumulate(const OutputBlock& out, const WeightBlock& p, const T* v, size_t v_stride, const RowList& rows,
                size_t n) {
    accumulate_by_pair(out, p, rows, [&](float* o, float w, uint32_t r) { axpy_row(o, w, v + r * v_stride, n); });
}

void dots_q8(float* scores, size_t ld, const QueryBlock& q, const int8_t* k, size_t k_stride, const float* k_scale,
             size_t k_scale_stride, const RowList& rows, size_t n) {
    dots_by_pair(scores, ld, q, rows, [&](const float* qj, uint32_t r) {
        return dot_q8(qj, k + r * k_stride, k_scale + r * k_scale_stride, n);
    });
}

void accumulate_q8(const OutputBlock& out, const WeightBlock& p, const int8_t* v, size_t v_stride, const float* v_scale,
                   size_t v_scale_stride, const RowList& rows, size_t n) {
    accumulate_by_pair(out, p, rows, [&](float* o, float w, uint32_t r) {
        axpy_q8(o, w, v + r * v_stride, v_scale + r * v_scale_stride, n);
    });
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_neon() {
    static const AttentionRowKernels table = {"neon",         to_half_row,          round_half_row, softmax,
                                              dots<uint16_t>, accumulate<uint16_t>, dots_q8,        accumulate_q8,
                                              dots<float>,    accumulate<float>};
    return table;
}

}  // namespace cactus
