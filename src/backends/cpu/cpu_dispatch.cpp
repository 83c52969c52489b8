#include "backends/cpu/cpu_dispatch.h"

#include "backends/cpu/cpu_features.h"

namespace cactus {

namespace {

#if defined(__x86_64__) || defined(_M_X64)
const ActivationKernels& pick_activations(const CpuFeatures& f) {
    return f.avx2 ? activation_kernels_avx2() : activation_kernels_generic();
}
const AttentionRowKernels& pick_attention(const CpuFeatures& f) {
    if (f.avx512_vnni) return attention_row_kernels_avx512();
    return f.avx2 ? attention_row_kernels_avx2() : attention_row_kernels_generic();
}
const DenseGemmKernels& pick_dense_gemm(const CpuFeatures& f) {
    if (f.avx512_vnni) return dense_gemm_kernels_avx512();
    return f.avx2 ? dense_gemm_kernels_avx2() : dense_gemm_kernels_generic();
}
#elif defined(__aarch64__)
// ASIMD is part of every aarch64 CPU: the NEON activations, attention rows and dense GEMM are
// always there.
const ActivationKernels& pick_activations(const CpuFeatures&) { return activation_kernels_neon(); }
const AttentionRowKernels& pick_attention(const CpuFeatures&) { return attention_row_kernels_neon(); }
const DenseGemmKernels& pick_dense_gemm(const CpuFeatures&) { return dense_gemm_kernels_neon(); }
#else
const ActivationKernels& pick_activations(const CpuFeatures&) { return activation_kernels_generic(); }
const AttentionRowKernels& pick_attention(const CpuFeatures&) { return attention_row_kernels_generic(); }
const DenseGemmKernels& pick_dense_gemm(const CpuFeatures&) { return dense_gemm_kernels_generic(); }
#endif

CpuKernelSet pick() {
    const CpuFeatures& features = cpu_features();
    CpuKernelSet set;
    set.matmul = cpu_kernel_tables().back();  // the widest table these features allow
    set.isa_name = set.matmul->isa_name;
    set.activations = &pick_activations(features);
    set.attention = &pick_attention(features);
    set.dense_gemm = &pick_dense_gemm(features);
    return set;
}

}  // namespace

const CpuKernelSet& cpu_kernel_set() {
    static const CpuKernelSet chosen = pick();
    return chosen;
}

const CpuKernels& cpu_kernels() { return *cpu_kernel_set().matmul; }
const ActivationKernels& activation_kernels() { return *cpu_kernel_set().activations; }
const AttentionRowKernels& attention_row_kernels() { return *cpu_kernel_set().attention; }
const DenseGemmKernels& dense_gemm_kernels() { return *cpu_kernel_set().dense_gemm; }

std::vector<const DenseGemmKernels*> dense_gemm_tables() {
    std::vector<const DenseGemmKernels*> tables = {&dense_gemm_kernels_generic()};
    const CpuFeatures detected = cpu_features_capped(nullptr);
    CpuFeatures narrower = detected;  // x86-64: the AVX2 table also runs on an AVX-512 CPU
    narrower.avx512_vnni = false;
    for (const CpuFeatures& f : {narrower, detected}) {
        const DenseGemmKernels* t = &pick_dense_gemm(f);
        if (t != tables.back()) tables.push_back(t);
    }
    return tables;
}

std::vector<const AttentionRowKernels*> attention_row_tables() {
    std::vector<const AttentionRowKernels*> tables = {&attention_row_kernels_generic()};
    const CpuFeatures detected = cpu_features_capped(nullptr);
    CpuFeatures narrower = detected;  // x86-64: the AVX2 table also runs on an AVX-512 CPU
    narrower.avx512_vnni = false;
    for (const CpuFeatures& f : {narrower, detected}) {
        const AttentionRowKernels* t = &pick_attention(f);
        if (t != tables.back()) tables.push_back(t);
    }
    return tables;
}

std::vector<const ActivationKernels*> activation_tables() {
    std::vector<const ActivationKernels*> tables = {&activation_kernels_generic()};
    const CpuFeatures detected = cpu_features_capped(nullptr);
    if (&pick_activations(detected) != tables[0]) tables.push_back(&pick_activations(detected));
    return tables;
}

}  // namespace cactus
