// AVX-512 VNNI kernels: the x86 kernels with the u8 x s8 dot product done by vpdpbusd (one
// instruction, no int16 saturation), on 256-bit vectors (AVX512VL) so clocks stay high.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/avx512/avx512_kernels.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

inline __m256i dot_u8_s8(__m256i acc, __m256i a, __m256i b) { return _mm256_dpbusd_epi32(acc, a, b); }

#include "backends/cpu/avx2/x86_quant_kernels.inl"

}  // namespace

void register_avx512_kernels(CpuKernels& t) {
    t.isa_name = "avx512_vnni";
    t.vec_dot[static_cast<size_t>(DType::Q4_0)] = vec_dot_q4_0;
    t.vec_dot[static_cast<size_t>(DType::Q4_1)] = vec_dot_q4_1;
    t.vec_dot[static_cast<size_t>(DType::Q5_0)] = vec_dot_q5_0;
    t.vec_dot[static_cast<size_t>(DType::Q8_0)] = vec_dot_q8_0;
    t.vec_dot[static_cast<size_t>(DType::Q4_K)] = vec_dot_q4_k;
    t.vec_dot[static_cast<size_t>(DType::Q5_K)] = vec_dot_q5_k;
    t.vec_dot[static_cast<size_t>(DType::Q6_K)] = vec_dot_q6_k;
    t.vec_dot[static_cast<size_t>(DType::F16)] = vec_dot_f16;
    t.vec_dot[static_cast<size_t>(DType::BF16)] = vec_dot_bf16;
    t.vec_dot[static_cast<size_t>(DType::F32)] = vec_dot_f32;
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}

}  // namespace cactus
