// AArch64 ASIMD activations (see activations.h): 4 lanes at a time, the scalar tail through a padded
// vector so every element takes the same path. The math of avx2/activations_avx2.cpp.
//
// This folder is compiled with -march=armv8.2-a+dotprod+fp16 for the dotprod tier; these kernels
// run on every aarch64 CPU, so the pragma takes the file back to base ARMv8 (as neon_kernels.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("arch=armv8-a")
#endif

#include <arm_neon.h>

#include "backends/cpu/activations.h"
#include "backends/cpu/neon/exp_neon.h"

namespace cactus {

namespace {

// out[i] = f(gate[i]) * up[i] (up null: f(gate[i])), 4 lanes at a time.
template <class F>
void elementwise(float* out, const float* gate, const float* up, size_t n, F f) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    auto step = [&](float32x4_t g, float32x4_t u) { return vmulq_f32(f(g), u); };
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, step(vld1q_f32(gate + i), up ? vld1q_f32(up + i) : one));
    if (i == n) return;
    float g[4] = {}, u[4] = {1, 1, 1, 1}, y[4];
    for (size_t l = 0; i + l < n; ++l) {
        g[l] = gate[i + l];
        if (up) u[l] = up[i + l];
    }
    vst1q_f32(y, step(vld1q_f32(g), vld1q_f32(u)));
    for (size_t l = 0; i + l < n; ++l) out[i + l] = y[l];
}

// gate / (1 + exp(arg(gate))) * up.
template <class Arg>
void gated(float* out, const float* gate, const float* up, size_t n, Arg arg) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    elementwise(out, gate, up, n, [&](float32x4_t g) { return vdivq_f32(g, vaddq_f32(one, exp_neon(arg(g)))); });
}

// -2u with u = sqrt(2/pi) (g + 0.044715 g^3): gelu_tanh(g) = g / (1 + exp(-2u))
inline float32x4_t gelu_tanh_arg(float32x4_t g) {
    const float32x4_t g3 = vmulq_f32(vmulq_f32(g, g), g);
    return vmulq_f32(vdupq_n_f32(-2.0f * 0.7978845608028654f), vfmaq_f32(g, vdupq_n_f32(0.044715f), g3));
}

// erfc(a) for a >= 0 (Numerical Recipes' erfcc, relative error < 1.2e-7), as activations_avx2.cpp.
inline float32x4_t erfc_nonnegative(float32x4_t a) {
    const float32x4_t t = vdivq_f32(vdupq_n_f32(1.0f), vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0.5f), a));
    const float c[] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                       0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    float32x4_t p = vdupq_n_f32(c[9]);
    for (int k = 8; k >= 0; --k) p = vfmaq_f32(vdupq_n_f32(c[k]), p, t);
    return vmulq_f32(t, exp_neon(vfmsq_f32(p, a, a)));  // t exp(-a^2 + P(t))
}

inline float32x4_t gelu_erf_vec(float32x4_t x) {
    const float32x4_t z = vmulq_f32(x, vdupq_n_f32(0.70710678118654752f));
    const float32x4_t y = erfc_nonnegative(vabsq_f32(z));
    const uint32x4_t nonneg = vcgeq_f32(z, vdupq_n_f32(0.0f));
    const float32x4_t one_plus_erf = vbslq_f32(nonneg, vsubq_f32(vdupq_n_f32(2.0f), y), y);
    return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), one_plus_erf);
}

void swiglu(float* out, const float* gate, const float* up, size_t n) {
    gated(out, gate, up, n, [](float32x4_t g) { return vnegq_f32(g); });
}

void geglu(float* out, const float* gate, const float* up, size_t n) { gated(out, gate, up, n, gelu_tanh_arg); }

void gelu_tanh(float* out, const float* x, size_t n) { gated(out, x, nullptr, n, gelu_tanh_arg); }

void gelu_erf(float* out, const float* x, size_t n) { elementwise(out, x, nullptr, n, gelu_erf_vec); }

// cap * tanh(x / cap), as activations_avx2.cpp computes it.
void softcap(float* out, const float* x, size_t n, float cap) {
    const float32x4_t c = vdupq_n_f32(cap);
    const float32x4_t one = vdupq_n_f32(1.0f);
    elementwise(out, x, nullptr, n, [&](float32x4_t v) {
        const float32x4_t z = vdivq_f32(v, c);
        const float32x4_t a = vabsq_f32(z);
        const float32x4_t t = exp_neon(vmulq_f32(vdupq_n_f32(-2.0f), a));
        const float32x4_t far = vdivq_f32(vsubq_f32(one, t), vaddq_f32(one, t));
        const float32x4_t a2 = vmulq_f32(a, a);
        const float32x4_t series = vfmaq_f32(vdupq_n_f32(-1.0f / 3.0f), vdupq_n_f32(2.0f / 15.0f), a2);
        const float32x4_t near = vfmaq_f32(a, vmulq_f32(series, a2), a);
        const float32x4_t r = vbslq_f32(vcltq_f32(a, vdupq_n_f32(0.1f)), near, far);
        const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(z), vdupq_n_u32(0x80000000u));
        return vmulq_f32(c, vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(r), sign)));
    });
}

}  // namespace

const ActivationKernels& activation_kernels_neon() {
    static const ActivationKernels table = {"neon", swiglu, geglu, gelu_tanh, gelu_erf, softcap};
    return table;
}

}  // namespace cactus
