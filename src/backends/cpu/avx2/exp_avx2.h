#pragma once
// exp on 8 floats (AVX2 + FMA): Cephes' single-precision polynomial, within about 1 ulp of expf.
// Results are 0 below -87.3 and +inf above 88.7. Include only from files built with -mavx2 -mfma.
#include <immintrin.h>

namespace cactus {

inline __m256 exp_avx2(__m256 x) {
    const __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    const __m256 above = _mm256_cmp_ps(x, _mm256_set1_ps(88.7f), _CMP_GT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    // 2^n in two steps, so n = 128 (x near 88.7) does not overflow the exponent field
    const __m256i n_int = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(n_int, 1);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 p2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(n_int, half), _mm256_set1_epi32(127)), 23));
    y = _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
    y = _mm256_andnot_ps(below, y);
    return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), above);
}

// exp(x) for x <= 0 (a softmax's x - max), the polynomial of exp_avx2 with its upper clamp and the
// two-step 2^n left out (n is in [-126, 0] here): bit for bit exp_avx2's result on [-100, 0] (all
// 1.1e9 floats compared), 0 below -87.3 and for -inf, with about 30% fewer instructions. N vectors
// go through each step together: one exp is a chain of ~12 dependent multiply-adds, and the
// out-of-order window of a Zen 1 core holds only ~3 iterations of a one-vector loop.
template <int N>
inline void exp_nonpositive_avx2_n(__m256* v) {
    __m256 below[N], n[N], y[N];
#define CACTUS_EACH for (int k = 0; k < N; ++k)
    CACTUS_EACH below[k] = _mm256_cmp_ps(v[k], _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    CACTUS_EACH v[k] = _mm256_max_ps(v[k], _mm256_set1_ps(-87.3f));
    CACTUS_EACH n[k] = _mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    CACTUS_EACH v[k] = _mm256_fnmadd_ps(n[k], _mm256_set1_ps(0.693359375f), v[k]);
    CACTUS_EACH v[k] = _mm256_fnmadd_ps(n[k], _mm256_set1_ps(-2.12194440e-4f), v[k]);
    CACTUS_EACH y[k] = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), v[k], _mm256_set1_ps(1.3981999507e-3f));
    CACTUS_EACH y[k] = _mm256_fmadd_ps(y[k], v[k], _mm256_set1_ps(8.3334519073e-3f));
    CACTUS_EACH y[k] = _mm256_fmadd_ps(y[k], v[k], _mm256_set1_ps(4.1665795894e-2f));
    CACTUS_EACH y[k] = _mm256_fmadd_ps(y[k], v[k], _mm256_set1_ps(1.6666665459e-1f));
    CACTUS_EACH y[k] = _mm256_fmadd_ps(y[k], v[k], _mm256_set1_ps(5.0000001201e-1f));
    CACTUS_EACH y[k] = _mm256_fmadd_ps(y[k], _mm256_mul_ps(v[k], v[k]), _mm256_add_ps(v[k], _mm256_set1_ps(1.0f)));
    CACTUS_EACH {
        const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n[k]), _mm256_set1_epi32(127)), 23);
        v[k] = _mm256_andnot_ps(below[k], _mm256_mul_ps(y[k], _mm256_castsi256_ps(pow2n)));
    }
#undef CACTUS_EACH
}

inline __m256 exp_nonpositive_avx2(__m256 x) {
    exp_nonpositive_avx2_n<1>(&x);
    return x;
}
}  // namespace cactus
