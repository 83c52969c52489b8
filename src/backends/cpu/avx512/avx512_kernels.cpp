// AVX-512 VNNI kernels: the x86 kernels with the u8 x s8 dot product done by vpdpbusd (one
// instruction, no int16 saturation), mostly on 256-bit vectors (AVX512VL); the 32-element formats
// multiply 16-row panels on 512-bit vectors, one row per 32-bit lane (avx512_panels.inl; one token
// goes through the x86 paired-row decode, x86_decode.inl, see register_avx512_kernels).
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*() and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "backends/cpu/avx2/x86_k_panel_layout.h"
#include "backends/cpu/avx512/avx512_kernels.h"
#include "core/error.h"
#include "ops/q4_0_x8.h"
#include "ops/q6_k_x8.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

inline __m256i dot_u8_s8(__m256i acc, __m256i a, __m256i b) { return _mm256_dpbusd_epi32(acc, a, b); }

#include "backends/cpu/avx2/x86_quant_kernels.inl"

constexpr bool kExactU8Dot = true;
constexpr size_t kMaxTileTokens = 4;

#include "backends/cpu/avx2/x86_gemm_tiles.inl"
#include "backends/cpu/avx2/x86_float_tiles.inl"

#include "backends/cpu/avx2/x86_panels.inl"
#include "backends/cpu/avx2/x86_decode.inl"
#include "backends/cpu/avx512/avx512_panels.inl"
#include "backends/cpu/avx512/avx512_k_panels.inl"
#include "backends/cpu/avx512/avx512_k_decode.inl"
#include "backends/cpu/avx512/avx512_k_x8_decode.inl"

// Q4_K and Q6_K are repacked at load as in the AVX2 table (Q4_K_X8, Q6_K_X8: one sequential stream
// per group of 8 rows), and prefill multiplies the packed panels on 512-bit vectors as Q4_K's and
// Q6_K's do (the X8 packers give the same panels). A model larger than the last-level cache streams
// every weight from memory, where the 8 rows side by side of the GGUF layout read slower (Q6_K
// 8960 x 1536 x 16 copies: 0.37-0.43 ms against 0.32-0.39): qwen2.5-coder-1.5b tg64 at 1 thread
// runs at 34.4 tok/s against 31.9 in the GGUF layout, pp512 the same, pp128 2% lower
// (bench/compare_llama.py, shuffled runs). Q6_K_X8's one token
// runs on 512-bit vectors (avx512_k_x8_decode.inl); Q4_K_X8 keeps the AVX2 group decode, which the
// model ran faster than a 512-bit one (34.7-35.4 against 32.7-33.7 tok/s) although that one was
// faster in cache (1536 x 512: 230-248 GFLOP/s against 147-150).
void use_k_x8_with_zmm_panels(CpuKernels& t) {
    CACTUS_ASSERT(t.repack[static_cast<size_t>(DType::Q4_K)] != nullptr &&
                  t.repack[static_cast<size_t>(DType::Q6_K)] != nullptr);  // the AVX2 table's layouts
    t.panel_gemm[static_cast<size_t>(DType::Q4_K_X8)] = k_panel_gemm_zmm<Q4_KPanelFacts>;
    t.panel_gemm[static_cast<size_t>(DType::Q6_K_X8)] = k_panel_gemm_zmm<Q6_KPanelFacts>;
}

}  // namespace

void register_avx512_kernels(CpuKernels& t, bool decode_prefetch_l1) {
    t.isa_name = "avx512_vnni";
    register_legacy_tiles(t);
    register_panels(t);  // replaces the legacy entries: another accumulation order, see there
    // Q4_K, Q5_K and Q6_K keep the AVX2 table's K panels, vec_dot and decode (faster than the 512-bit
    // K tiles, above all for one token: bench/compare_llama.py), and
    // multiply the panels 16 rows per zmm:
    register_k_panels_zmm(t);
    register_k_decode_zmm(t, decode_prefetch_l1);     // one token of Q4_K and Q6_K on 512-bit vectors
    use_k_x8_with_zmm_panels(t);                      // the AVX2 table's packers and Q4_K_X8 decode
    register_k_x8_decode_zmm(t, decode_prefetch_l1);  // Q6_K_X8's one token on 512-bit vectors
    // One token of Q4_0/Q4_1/Q5_0/Q8_0: the AVX2 table's 8-row decode (the same accumulation order
    // as these panels, and faster than 512-bit row panels on Zen 4 and on a Sapphire Rapids Xeon,
    // bench/compare_llama.py), compiled here with vpdpbusd for the nibble formats' dots.
    register_panel_decodes(t, decode_prefetch_l1);
    register_q4_0_x8(t, decode_prefetch_l1);  // with this table's dots and panels
    register_float_tiles(t);
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}

}  // namespace cactus
