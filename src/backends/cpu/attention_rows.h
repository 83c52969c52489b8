#pragma once
// Row primitives of attention, one implementation per ISA, chosen once (attention_cpu.cpp):
//   dot:  q . k for one key row            axpy: out += p * v for one value row
// Rows are f16 or int8 with one scale per group of 32 (kKvGroup).
#include <cstddef>
#include <cstdint>

namespace cactus {

struct AttentionRowKernels {
    const char* isa_name;
    float (*dot_f16)(const float* q, const uint16_t* k, size_t n);
    void (*axpy_f16)(float* out, float p, const uint16_t* v, size_t n);
    float (*dot_q8)(const float* q, const int8_t* k, const float* k_scale, size_t n);
    void (*axpy_q8)(float* out, float p, const int8_t* v, const float* v_scale, size_t n);
};

const AttentionRowKernels& attention_row_kernels_generic();
const AttentionRowKernels& attention_row_kernels_avx2();  // x86-64 only (avx2/attention_avx2.cpp)
// The best table for this CPU (chosen once).
const AttentionRowKernels& attention_row_kernels();

}  // namespace cactus
