#include "backends/cpu/activations.h"

#include <cmath>

#include "backends/cpu/ops_cpu.h"

namespace cactus {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;

void swiglu_generic(float* out, const float* gate, const float* up, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu_generic(float* out, const float* gate, const float* up, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const float g = gate[i];
        // 0.5 (1 + tanh(u)) == 1 / (1 + exp(-2u)): same value, no cancellation for g << 0.
        const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        out[i] = g / (1.0f + std::exp(-2.0f * u)) * up[i];
    }
}

void gelu_tanh_generic(float* out, const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const float g = x[i];
        const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        out[i] = g / (1.0f + std::exp(-2.0f * u));
    }
}

void gelu_erf_generic(float* out, const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * std::erfc(-x[i] * 0.70710678118654752f);
}

void softcap_generic(float* out, const float* x, size_t n, float cap) {
    for (size_t i = 0; i < n; ++i) out[i] = softcap_ref(x[i], cap);
}

}  // namespace

const ActivationKernels& activation_kernels_generic() {
    static const ActivationKernels table = {"generic",         swiglu_generic,   geglu_generic,
                                            gelu_tanh_generic, gelu_erf_generic, softcap_generic};
    return table;
}

void swiglu(float* out, const float* gate, const float* up, size_t n) { activation_kernels().swiglu(out, gate, up, n); }

void geglu(float* out, const float* gate, const float* up, size_t n) { activation_kernels().geglu(out, gate, up, n); }

}  // namespace cactus
