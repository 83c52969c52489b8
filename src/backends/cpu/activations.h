#pragma once
// Gated activations of the feed-forward layers, one implementation per ISA, chosen once:
//   swiglu: out[i] = silu(gate[i]) * up[i]        geglu: out[i] = gelu_tanh(gate[i]) * up[i]
// out may alias gate. Same math as swiglu_ref / geglu_ref (src/ops/ops_ref.h); the vector
// versions use a polynomial exp within about 1 ulp of expf.
#include <cstddef>

namespace cactus {

struct ActivationKernels {
    const char* isa_name;
    void (*swiglu)(float* out, const float* gate, const float* up, size_t n);
    void (*geglu)(float* out, const float* gate, const float* up, size_t n);
};

const ActivationKernels& activation_kernels_generic();
const ActivationKernels& activation_kernels_avx2();  // x86-64 only (avx2/activations_avx2.cpp)
// The best table for this CPU (chosen once).
const ActivationKernels& activation_kernels();

}  // namespace cactus
