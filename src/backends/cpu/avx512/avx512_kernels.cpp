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

// Q4_K and Q6_K stay as the file has them here: the 512-bit K decode reads them at the bandwidth
// bound already (qwen2.5-coder-1.5b tg64 at 1 thread 33.7 tok/s either way with Q4_K_X8, session
// 16; 29-31 either way with Q6_K_X8, session 17), while the AVX2 table's repacked layouts would
// take prefill to its 256-bit panels (Q4_K_X8: pp128 162 -> 72 tok/s) or pay their packer
// (Q6_K_X8 with the 512-bit panels: pp128 -4%). Session 20 again, both layouts with the 512-bit
// panel products for prefill: qwen pp128 at 1 thread -18% (the rows rebuilt per panel), tg at
// 1 thread 30.3 tok/s against 30.7 (medians of 10 runs in shuffled order).
void drop_k_x8(CpuKernels& t) {
    const DType files[] = {DType::Q4_K, DType::Q6_K}, layouts[] = {DType::Q4_K_X8, DType::Q6_K_X8};
    for (size_t k = 0; k < 2; ++k) {
        const size_t x8 = static_cast<size_t>(layouts[k]);
        t.repack[static_cast<size_t>(files[k])] = nullptr;
        t.pack_panel[x8] = nullptr;
        t.panel_act[x8] = nullptr;
        t.panel_gemm[x8] = nullptr;
        t.panel_decode[x8] = nullptr;
    }
}

}  // namespace

void register_avx512_kernels(CpuKernels& t, bool decode_prefetch_l1) {
    t.isa_name = "avx512_vnni";
    register_legacy_tiles(t);
    register_panels(t);  // replaces the legacy entries: another accumulation order, see there
    // Q4_K, Q5_K and Q6_K keep the AVX2 table's K panels, vec_dot and decode (faster than the 512-bit
    // K tiles this table had, above all for one token: docs/PERFORMANCE.md, session 11), and
    // multiply the panels 16 rows per zmm:
    register_k_panels_zmm(t);
    register_k_decode_zmm(t, decode_prefetch_l1);  // one token of Q4_K and Q6_K on 512-bit vectors (session 12, Zen 5)
    drop_k_x8(t);
    // One token of Q4_0/Q4_1/Q5_0/Q8_0: the AVX2 table's 8-row decode (the same accumulation order
    // as these panels, and faster than 512-bit row panels on Zen 4 and on a Sapphire Rapids Xeon,
    // docs/PERFORMANCE.md, session 10), compiled here with vpdpbusd for the nibble formats' dots.
    register_panel_decodes(t, decode_prefetch_l1);
    register_q4_0_x8(t, decode_prefetch_l1);  // with this table's dots and panels (session 17)
    register_float_tiles(t);
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}

}  // namespace cactus
