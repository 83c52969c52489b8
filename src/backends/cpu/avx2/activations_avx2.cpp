// AVX2 + FMA activations (see activations.h): 8 lanes at a time, the scalar tail through a
// padded vector so every element takes the same path.
#include <immintrin.h>

#include "backends/cpu/activations.h"
#include "backends/cpu/avx2/exp_avx2.h"

namespace cactus {

namespace {

// out[i] = f(gate[i]) * up[i] (up null: f(gate[i])), 8 lanes at a time.
template <class F>
void elementwise(float* out, const float* gate, const float* up, size_t n, F f) {
    const __m256 one = _mm256_set1_ps(1.0f);
    auto step = [&](__m256 g, __m256 u) { return _mm256_mul_ps(f(g), u); };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, step(_mm256_loadu_ps(gate + i), up ? _mm256_loadu_ps(up + i) : one));
    }
    if (i == n) return;
    alignas(32) float g[8] = {}, u[8] = {1, 1, 1, 1, 1, 1, 1, 1}, y[8];
    for (size_t l = 0; i + l < n; ++l) {
        g[l] = gate[i + l];
        if (up) u[l] = up[i + l];
    }
    _mm256_store_ps(y, step(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (size_t l = 0; i + l < n; ++l) out[i + l] = y[l];
}

// gate / (1 + exp(-k(gate))) * up, with k the activation's argument of exp.
template <class Arg>
void gated(float* out, const float* gate, const float* up, size_t n, Arg arg) {
    const __m256 one = _mm256_set1_ps(1.0f);
    elementwise(out, gate, up, n, [&](__m256 g) { return _mm256_div_ps(g, _mm256_add_ps(one, exp_avx2(arg(g)))); });
}

// -2u with u = sqrt(2/pi) (g + 0.044715 g^3): gelu_tanh(g) = g / (1 + exp(-2u))
inline __m256 gelu_tanh_arg(__m256 g) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    return _mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.7978845608028654f),
                         _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
}

// 0.5 x (1 + erf(z)), z = x / sqrt 2, with 1 + erf(z) = erfc(-z): 2 - erfc(z) for z >= 0, and
// erfc(a) for a >= 0 as t exp(-a^2 + P(t)), t = 1 / (1 + a / 2) (Numerical Recipes' erfcc, relative
// error < 1.2e-7 for every a). N vectors step by step together, as exp_nonpositive_avx2_n: one
// vector's chain (a division, 10 multiply-adds, the exp) is far longer than the out-of-order window.
template <int N>
inline void gelu_erf_n(__m256* x) {
    static constexpr float c[] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                                  0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    __m256 z[N], a[N], t[N], p[N];
#define CACTUS_EACH for (int k = 0; k < N; ++k)
    CACTUS_EACH z[k] = _mm256_mul_ps(x[k], _mm256_set1_ps(0.70710678118654752f));
    CACTUS_EACH a[k] = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z[k]);
    CACTUS_EACH t[k] =
        _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a[k], _mm256_set1_ps(1.0f)));
    CACTUS_EACH p[k] = _mm256_set1_ps(c[9]);
    for (int j = 8; j >= 0; --j) CACTUS_EACH p[k] = _mm256_fmadd_ps(p[k], t[k], _mm256_set1_ps(c[j]));
    CACTUS_EACH p[k] = _mm256_fnmadd_ps(a[k], a[k], p[k]);  // -a^2 + P(t), at most P(1) = 3e-8 (a = 0)
    exp_nonpositive_avx2_n<N>(p);
    CACTUS_EACH {
        const __m256 y = _mm256_mul_ps(t[k], p[k]);  // erfc(|z|)
        const __m256 nonneg = _mm256_cmp_ps(z[k], _mm256_setzero_ps(), _CMP_GE_OQ);
        const __m256 one_plus_erf = _mm256_blendv_ps(y, _mm256_sub_ps(_mm256_set1_ps(2.0f), y), nonneg);
        x[k] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x[k]), one_plus_erf);
    }
#undef CACTUS_EACH
}

inline __m256 gelu_erf_vec(__m256 x) {
    gelu_erf_n<1>(&x);
    return x;
}

void swiglu(float* out, const float* gate, const float* up, size_t n) {
    gated(out, gate, up, n, [](__m256 g) { return _mm256_sub_ps(_mm256_setzero_ps(), g); });
}

void geglu(float* out, const float* gate, const float* up, size_t n) { gated(out, gate, up, n, gelu_tanh_arg); }

void gelu_tanh(float* out, const float* x, size_t n) { gated(out, x, nullptr, n, gelu_tanh_arg); }

void gelu_erf(float* out, const float* x, size_t n) {
    constexpr size_t kTogether = 4;
    size_t i = 0;
    for (; i + 8 * kTogether <= n; i += 8 * kTogether) {
        __m256 v[kTogether];
        for (size_t k = 0; k < kTogether; ++k) v[k] = _mm256_loadu_ps(x + i + 8 * k);
        gelu_erf_n<kTogether>(v);
        for (size_t k = 0; k < kTogether; ++k) _mm256_storeu_ps(out + i + 8 * k, v[k]);
    }
    elementwise(out + i, x + i, nullptr, n - i, gelu_erf_vec);
}

// cap * tanh(x / cap): tanh(|z|) = (1 - t) / (1 + t), t = exp(-2|z|), and below |z| = 0.1, where
// 1 - t cancels, z - z^3/3 + 2z^5/15; the sign put back last.
void softcap(float* out, const float* x, size_t n, float cap) {
    const __m256 c = _mm256_set1_ps(cap);
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 one = _mm256_set1_ps(1.0f);
    elementwise(out, x, nullptr, n, [&](__m256 v) {
        const __m256 z = _mm256_div_ps(v, c);
        const __m256 a = _mm256_andnot_ps(sign_bit, z);
        const __m256 t = exp_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), a));
        const __m256 far = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
        const __m256 a2 = _mm256_mul_ps(a, a);
        const __m256 series = _mm256_fmadd_ps(_mm256_set1_ps(2.0f / 15.0f), a2, _mm256_set1_ps(-1.0f / 3.0f));
        const __m256 near = _mm256_fmadd_ps(_mm256_mul_ps(series, a2), a, a);
        const __m256 r = _mm256_blendv_ps(far, near, _mm256_cmp_ps(a, _mm256_set1_ps(0.1f), _CMP_LT_OQ));
        return _mm256_mul_ps(c, _mm256_or_ps(r, _mm256_and_ps(z, sign_bit)));
    });
}

}  // namespace

const ActivationKernels& activation_kernels_avx2() {
    static const ActivationKernels table = {"avx2", swiglu, geglu, gelu_tanh, gelu_erf, softcap};
    return table;
}

}  // namespace cactus
