// AMX panel products of the 32-element formats (Q4_0, Q4_1, Q5_0, Q8_0): the AVX-512 table's row
// panels (layout in cpu_kernels.h) multiplied with 16 tokens at a time by one tile instruction per
// block, instead of 8 vpdpbusd per token.
//
// Per block of 32 quants and group of 16 tokens, one TDPBSUD computes the 16 x 16 exact int32 dots
//   C[t][r] = sum_k x_t[k] * u_r[k]
//   A [16 tokens][32] s8: the tokens' Q8 quants, read in place from the activation rows;
//   B [8 groups][16 rows x 4] u8: the panel block itself (its groups are the layout a B tile wants);
// then AVX-512 does the panels' float work on row t of C (the 16 weight rows in the lanes):
//   acc[t] = fma(d_w * d_x[t], float(C[t] + bias[t]), acc[t])     in block order,
// the same operations as the AVX-512 panel_tile and panel_vec_dot, so the result is equal bit for
// bit. Fewer than 16 tokens left over go through the AVX-512 panel product.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*() and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "backends/cpu/amx/amx_kernels.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

constexpr size_t kTileTokens = 16;  // rows of the A and C tiles
constexpr size_t kBlockQuants = 32;

// The AVX-512 table's panel product of each type, for the tokens left over from groups of 16.
PanelGemmFn g_avx512_panel_gemm[kDTypeSlots] = {};

// The 64-byte operand of LDTILECFG, palette 1.
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};  // bytes per row of tile i
    uint8_t rows[16] = {};
};

// tmm0, tmm1: C [16 tokens][16 rows] int32 of two blocks; tmm2, tmm3: their A; tmm4, tmm5: their B.
constexpr TileConfig panel_tile_config() {
    TileConfig cfg;
    for (int c : {0, 1}) {
        cfg.rows[c] = kTileTokens;
        cfg.colsb[c] = kPanelRows * sizeof(int32_t);
    }
    for (int a : {2, 3}) {
        cfg.rows[a] = kTileTokens;
        cfg.colsb[a] = kBlockQuants;
    }
    for (int b : {4, 5}) {
        cfg.rows[b] = kBlockQuants / 4;
        cfg.colsb[b] = kPanelGroupBytes;
    }
    return cfg;
}
// In static memory: GCC 12 does not see LDTILECFG read a local operand and drops its stores.
constexpr TileConfig kPanelTileConfig = panel_tile_config();

// acc[t] += (d_w * d_x[t]) * float(dots[t] + bias[t]), t < 16, for one block.
// dots: [16 tokens][16 rows] int32 (a stored C tile); act: the block's facts of token 0, tokens
// act_row_blocks apart.
inline void scale_block(__m512* acc, const int32_t (*dots)[kPanelRows], const uint8_t* panel_block,
                        const PanelActBlock* act, size_t act_row_blocks) {
    const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(panel_block + kPanelScaleOffset));
    for (size_t t = 0; t < kTileTokens; ++t) {
        const PanelActBlock& a = act[t * act_row_blocks];
        const __m512i dot = _mm512_add_epi32(_mm512_load_si512(dots[t]), _mm512_set1_epi32(a.bias));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a.d)), _mm512_cvtepi32_ps(dot), acc[t]);
    }
}

// y[t] += the panels' acc_min of token t: fma(m_w, s_x[t], acc_min) in block order (Q4_1).
void add_minimums(float* y, size_t y_stride, const uint8_t* panel, const PanelActBlock* act, size_t act_row_blocks,
                  size_t n_blocks) {
    for (size_t t = 0; t < kTileTokens; ++t) {
        __m512 acc_min = _mm512_setzero_ps();
        for (size_t b = 0; b < n_blocks; ++b) {
            const __m512 m =
                _mm512_loadu_ps(reinterpret_cast<const float*>(panel + b * kPanelBlockBytes + kPanelMinOffset));
            acc_min = _mm512_fmadd_ps(m, _mm512_set1_ps(act[t * act_row_blocks + b].s), acc_min);
        }
        float* yt = y + t * y_stride;
        _mm512_storeu_ps(yt, _mm512_add_ps(_mm512_loadu_ps(yt), acc_min));
    }
}

// y: [16 tokens] rows of y_stride, 16 outputs each  <-  panel [n_blocks] x 16 activation rows.
// Tiles configured as kPanelTileConfig.
template <class ActBlock, bool kHasMin>
void tile_16_tokens(float* y, size_t y_stride, const uint8_t* panel, const uint8_t* x, size_t x_row_bytes,
                    const PanelActBlock* act, size_t act_row_blocks, size_t n_blocks) {
    __m512 acc[kTileTokens];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    // dots[pair & 1][k]: C of block 2 * pair + k. The tiles of a pair of blocks run while the float
    // work reads the previous pair's C, so no load waits for the tile store just issued.
    alignas(64) int32_t dots[2][2][kTileTokens][kPanelRows];
    const uint8_t* xq = x + offsetof(ActBlock, qs);
    const long x_stride = static_cast<long>(x_row_bytes);
    const size_t n_pairs = n_blocks / 2;
    for (size_t pair = 0; pair <= n_pairs; ++pair) {
        if (pair < n_pairs) {
            const size_t b = 2 * pair;
            const uint8_t* p = panel + b * kPanelBlockBytes;
            _tile_zero(0);
            _tile_zero(1);
            _tile_loadd(2, xq + b * sizeof(ActBlock), x_stride);
            _tile_loadd(4, p, kPanelGroupBytes);
            _tile_loadd(3, xq + (b + 1) * sizeof(ActBlock), x_stride);
            _tile_loadd(5, p + kPanelBlockBytes, kPanelGroupBytes);
            _tile_dpbsud(0, 2, 4);
            _tile_dpbsud(1, 3, 5);
            _tile_stored(0, dots[pair & 1][0], sizeof(dots[0][0][0]));
            _tile_stored(1, dots[pair & 1][1], sizeof(dots[0][0][0]));
        }
        if (pair > 0) {
            const size_t b = 2 * (pair - 1);
            const uint8_t* p = panel + b * kPanelBlockBytes;
            scale_block(acc, dots[(pair - 1) & 1][0], p, act + b, act_row_blocks);
            scale_block(acc, dots[(pair - 1) & 1][1], p + kPanelBlockBytes, act + b + 1, act_row_blocks);
        }
    }
    if (n_blocks % 2 != 0) {
        const size_t b = n_blocks - 1;
        const uint8_t* p = panel + b * kPanelBlockBytes;
        _tile_zero(0);
        _tile_loadd(2, xq + b * sizeof(ActBlock), x_stride);
        _tile_loadd(4, p, kPanelGroupBytes);
        _tile_dpbsud(0, 2, 4);
        _tile_stored(0, dots[0][0], sizeof(dots[0][0][0]));
        scale_block(acc, dots[0][0], p, act + b, act_row_blocks);
    }
    for (size_t t = 0; t < kTileTokens; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
    if constexpr (kHasMin) add_minimums(y, y_stride, panel, act, act_row_blocks, n_blocks);
}

// PanelGemmFn: groups of 16 tokens through the tiles, the rest through the AVX-512 panels.
template <DType kType, class ActBlock, bool kHasMin>
void amx_panel_gemm(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                    const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens) {
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    const size_t full = n_tokens / kTileTokens * kTileTokens;
    if (full > 0) {
        _tile_loadconfig(&kPanelTileConfig);
        for (size_t t0 = 0; t0 < full; t0 += kTileTokens) {
            tile_16_tokens<ActBlock, kHasMin>(y + t0 * y_stride, y_stride, panel, xp + t0 * x_row_bytes, x_row_bytes,
                                              act + t0 * act_row_blocks, act_row_blocks, n / kBlockQuants);
        }
        _tile_release();  // the thread's 8 KiB tile state goes back to its initial (unsaved) form
    }
    if (full < n_tokens) {
        g_avx512_panel_gemm[static_cast<size_t>(kType)](y + full * y_stride, y_stride, panel, xp + full * x_row_bytes,
                                                        x_row_bytes, act + full * act_row_blocks, act_row_blocks, n,
                                                        n_tokens - full);
    }
}

template <DType kType, class ActBlock, bool kHasMin>
void register_panel(CpuKernels& t) {
    const size_t i = static_cast<size_t>(kType);
    CACTUS_ASSERT(t.panel_gemm[i] != nullptr && t.pack_panel[i] != nullptr);  // the AVX-512 panels
    g_avx512_panel_gemm[i] = t.panel_gemm[i];
    t.panel_gemm[i] = amx_panel_gemm<kType, ActBlock, kHasMin>;
}

}  // namespace

void register_amx_kernels(CpuKernels& t) {
    t.isa_name = "avx512_amx";
    register_panel<DType::Q4_0, BlockQ8_0, false>(t);
    register_panel<DType::Q4_1, BlockQ8_1, true>(t);
    register_panel<DType::Q5_0, BlockQ8_0, false>(t);
    register_panel<DType::Q8_0, BlockQ8_0, false>(t);
}

}  // namespace cactus
