#pragma once
// Activations of the feed-forward layers, one implementation per ISA, chosen once:
//   swiglu: out[i] = silu(gate[i]) * up[i]        geglu: out[i] = gelu_tanh(gate[i]) * up[i]
//   gelu_tanh: out[i] = gelu_tanh(x[i])           gelu_erf: out[i] = 0.5 x (1 + erf(x / sqrt 2))
//   softcap: out[i] = cap * tanh(x[i] / cap)      (the final logits of Gemma: 262,144 per token)
// out may alias gate / x. Same math as swiglu_ref / geglu_ref / gelu_tanh_ref (src/ops/ops_ref.h);
// the vector versions use a polynomial exp within about 1 ulp of expf, and gelu_erf a rational
// erfc with a relative error below 1.2e-7 (Numerical Recipes' erfcc), so its tail for x << 0 keeps
// its relative precision (1 + erf(z) is computed as erfc(-z), no cancellation); softcap's tanh is
// (1 - t) / (1 + t), t = exp(-2|z|), with an odd Taylor series below |z| = 0.1 where 1 - t cancels
// (relative error below 4e-7).
#include <cstddef>
#include <vector>

namespace cactus {

struct ActivationKernels {
    const char* isa_name;
    void (*swiglu)(float* out, const float* gate, const float* up, size_t n);
    void (*geglu)(float* out, const float* gate, const float* up, size_t n);
    void (*gelu_tanh)(float* out, const float* x, size_t n);
    void (*gelu_erf)(float* out, const float* x, size_t n);
    void (*softcap)(float* out, const float* x, size_t n, float cap);
};

const ActivationKernels& activation_kernels_generic();
const ActivationKernels& activation_kernels_avx2();  // x86-64 only (avx2/activations_avx2.cpp)
const ActivationKernels& activation_kernels_neon();  // aarch64 only (neon/activations_neon.cpp)
// Every table this CPU can run, generic first (tests; cpu_dispatch.cpp).
std::vector<const ActivationKernels*> activation_tables();
// The best table for this CPU (chosen once).
const ActivationKernels& activation_kernels();

}  // namespace cactus
