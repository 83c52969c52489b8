#pragma once
// The one dispatch point of the CPU backend: the CPU's features (capped by CACTUS_CPU_ISA) are read
// once and every kernel table is picked here together (matrix products and quantizers, gated
// activations, attention rows), so all ops of a run use the same tier. cpu_kernels(),
// activation_kernels() and attention_row_kernels() are views of this set.
#include "backends/cpu/activations.h"
#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dense_gemm.h"

namespace cactus {

struct CpuKernelSet {
    const char* isa_name;                  // of the matrix table: "generic", "avx2", "avx512", ...
    const CpuKernels* matmul;              // vec_dot, tiles, panels, quantizers
    const ActivationKernels* activations;  // swiglu, geglu
    const AttentionRowKernels* attention;  // KV row dots, softmax, half conversions
    const DenseGemmKernels* dense_gemm;    // encoders' f32 attention products
};

// Chosen once (thread-safe); throws cactus::Error on an unknown CACTUS_CPU_ISA.
const CpuKernelSet& cpu_kernel_set();

}  // namespace cactus
