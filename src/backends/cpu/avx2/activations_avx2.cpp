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

// erfc(a) for a >= 0: t exp(-a^2 + P(t)), t = 1 / (1 + a / 2) (Numerical Recipes' erfcc, relative
// error < 1.2e-7 for every a).
inline __m256 erfc_nonnegative(__m256 a) {
    const __m256 t =
        _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a, _mm256_set1_ps(1.0f)));
    const float c[] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                       0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    __m256 p = _mm256_set1_ps(c[9]);
    for (int k = 8; k >= 0; --k) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[k]));
    const __m256 arg = _mm256_fnmadd_ps(a, a, p);  // -a^2 + P(t)
    return _mm256_mul_ps(t, exp_avx2(arg));
}

// 0.5 x (1 + erf(z)), z = x / sqrt 2, with 1 + erf(z) = erfc(-z): 2 - erfc(z) for z >= 0.
inline __m256 gelu_erf_vec(__m256 x) {
    const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    const __m256 y = erfc_nonnegative(a);
    const __m256 nonneg = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GE_OQ);
    const __m256 one_plus_erf = _mm256_blendv_ps(y, _mm256_sub_ps(_mm256_set1_ps(2.0f), y), nonneg);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), one_plus_erf);
}

void swiglu(float* out, const float* gate, const float* up, size_t n) {
    gated(out, gate, up, n, [](__m256 g) { return _mm256_sub_ps(_mm256_setzero_ps(), g); });
}

void geglu(float* out, const float* gate, const float* up, size_t n) { gated(out, gate, up, n, gelu_tanh_arg); }

void gelu_tanh(float* out, const float* x, size_t n) { gated(out, x, nullptr, n, gelu_tanh_arg); }

void gelu_erf(float* out, const float* x, size_t n) { elementwise(out, x, nullptr, n, gelu_erf_vec); }

}  // namespace

const ActivationKernels& activation_kernels_avx2() {
    static const ActivationKernels table = {"avx2", swiglu, geglu, gelu_tanh, gelu_erf};
    return table;
}

}  // namespace cactus
