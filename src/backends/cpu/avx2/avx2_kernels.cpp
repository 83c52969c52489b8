// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; used only when the CPU has them).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/avx2/avx2_kernels.h"
#include "backends/cpu/avx2/x86_k_panel_layout.h"
#include "ops/q4_k_x8.h"
#include "ops/q6_k_x8.h"
#include "ops/q4_0_x8.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

// u8 x s8 products summed per 4 bytes: maddubs to int16 pairs, then madd to int32. The int16
// stage cannot saturate for our operands (quants of at most 6 bits, or |.| <= 128 with |act| <= 127).
inline __m256i dot_u8_s8(__m256i acc, __m256i a, __m256i b) {
    const __m256i pairs = _mm256_maddubs_epi16(a, b);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

#include "backends/cpu/avx2/x86_quant_kernels.inl"

constexpr bool kExactU8Dot = false;
constexpr size_t kMaxTileTokens = 2;

#include "backends/cpu/avx2/x86_gemm_tiles.inl"
#include "backends/cpu/avx2/x86_panels.inl"
#include "backends/cpu/avx2/x86_decode.inl"
#include "backends/cpu/avx2/avx2_panels.inl"
#include "backends/cpu/avx2/avx2_k_panels.inl"
#include "backends/cpu/avx2/avx2_q4_k_x8.inl"
#include "backends/cpu/avx2/avx2_q6_k_x8.inl"
#include "backends/cpu/avx2/x86_float_tiles.inl"

}  // namespace

void register_avx2_kernels(CpuKernels& t, bool decode_prefetch_l1) {
    t.isa_name = "avx2";
    register_legacy_tiles(t);
    register_panels(t);  // replaces the legacy entries: another accumulation order, see there
    register_panel_decodes(t, decode_prefetch_l1);
    register_q4_0_x8(t, decode_prefetch_l1);   // Q4_0 repacked at load: the decode reads one stream
    register_k_panels(t, decode_prefetch_l1);  // Q4_K, Q5_K, Q6_K: vec_dot in the panels' order, panels, decode
    register_q4_k_x8(t, decode_prefetch_l1);   // Q4_K repacked at load: one stream, scales unpacked once
    register_q6_k_x8(t, decode_prefetch_l1);   // Q6_K likewise (see q6_k_x8.h)
    register_float_tiles(t);
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}

}  // namespace cactus
