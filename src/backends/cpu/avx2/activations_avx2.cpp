// AVX2 + FMA gated activations (see activations.h): 8 lanes at a time, the scalar tail through a
// padded vector so every element takes the same path.
#include <immintrin.h>

#include "backends/cpu/activations.h"
#include "backends/cpu/avx2/exp_avx2.h"

namespace cactus {

namespace {

// gate / (1 + exp(-k(gate))) * up, with k the activation's argument of exp.
template <class Arg>
void gated(float* out, const float* gate, const float* up, size_t n, Arg arg) {
    const __m256 one = _mm256_set1_ps(1.0f);
    auto step = [&](__m256 g, __m256 u) {
        return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp_avx2(arg(g)))), u);
    };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, step(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i == n) return;
    alignas(32) float g[8] = {}, u[8] = {}, y[8];
    for (size_t l = 0; i + l < n; ++l) {
        g[l] = gate[i + l];
        u[l] = up[i + l];
    }
    _mm256_store_ps(y, step(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (size_t l = 0; i + l < n; ++l) out[i + l] = y[l];
}

void swiglu(float* out, const float* gate, const float* up, size_t n) {
    gated(out, gate, up, n, [](__m256 g) { return _mm256_sub_ps(_mm256_setzero_ps(), g); });
}

void geglu(float* out, const float* gate, const float* up, size_t n) {
    // -2u with u = sqrt(2/pi) (g + 0.044715 g^3)
    const __m256 c = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
    const __m256 c3 = _mm256_set1_ps(0.044715f);
    gated(out, gate, up, n, [&](__m256 g) {
        const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
        return _mm256_mul_ps(c, _mm256_fmadd_ps(c3, g3, g));
    });
}

}  // namespace

const ActivationKernels& activation_kernels_avx2() {
    static const ActivationKernels table = {"avx2", swiglu, geglu};
    return table;
}

}  // namespace cactus
