// AVX2 + FMA + F16C row primitives of attention (see attention_rows.h).
#include <immintrin.h>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/ops_cpu.h"

namespace cactus {

namespace {

constexpr size_t kGroup = 32;

inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 load_i8(const int8_t* p) {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

float dot_f16(const float* q, const uint16_t* k, size_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16(k + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load_f16(k + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16(k + i), acc0);
    float sum = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += q[i] * half_to_float(k[i]);
    return sum;
}

void axpy_f16(float* out, float p, const uint16_t* v, size_t n) {
    const __m256 w = _mm256_set1_ps(p);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(w, load_f16(v + i), _mm256_loadu_ps(out + i)));
    }
    for (; i < n; ++i) out[i] += p * half_to_float(v[i]);
}

float dot_q8(const float* q, const int8_t* k, const float* k_scale, size_t n) {
    float sum = 0.0f;
    size_t g0 = 0;
    for (; g0 + kGroup <= n; g0 += kGroup) {
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q + g0), load_i8(k + g0));
        for (size_t i = 8; i < kGroup; i += 8)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + g0 + i), load_i8(k + g0 + i), acc);
        sum += hsum(acc) * k_scale[g0 / kGroup];
    }
    if (g0 < n) {
        float part = 0.0f;
        for (size_t i = g0; i < n; ++i) part += q[i] * static_cast<float>(k[i]);
        sum += part * k_scale[g0 / kGroup];
    }
    return sum;
}

void axpy_q8(float* out, float p, const int8_t* v, const float* v_scale, size_t n) {
    size_t g0 = 0;
    for (; g0 + kGroup <= n; g0 += kGroup) {
        const __m256 w = _mm256_set1_ps(p * v_scale[g0 / kGroup]);
        for (size_t i = 0; i < kGroup; i += 8) {
            float* o = out + g0 + i;
            _mm256_storeu_ps(o, _mm256_fmadd_ps(w, load_i8(v + g0 + i), _mm256_loadu_ps(o)));
        }
    }
    if (g0 < n) {
        const float w = p * v_scale[g0 / kGroup];
        for (size_t i = g0; i < n; ++i) out[i] += w * static_cast<float>(v[i]);
    }
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_avx2() {
    static const AttentionRowKernels table = {"avx2", dot_f16, axpy_f16, dot_q8, axpy_q8};
    return table;
}

}  // namespace cactus
