// AVX-512 VNNI kernels: the x86 kernels with the u8 x s8 dot product done by vpdpbusd (one
// instruction, no int16 saturation), mostly on 256-bit vectors (AVX512VL); the prefill tiles of the
// 32-element formats use 512-bit vectors, two tokens per register.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*() and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/avx512/avx512_kernels.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus {

namespace {

inline __m256i dot_u8_s8(__m256i acc, __m256i a, __m256i b) { return _mm256_dpbusd_epi32(acc, a, b); }

#include "backends/cpu/avx2/x86_quant_kernels.inl"

constexpr bool kExactU8Dot = true;
constexpr size_t kMaxTileTokens = 4;

#include "backends/cpu/avx2/x86_gemm_tiles.inl"
#include "backends/cpu/avx2/x86_k_tiles.inl"

// ---- 512-bit tiles: two tokens per zmm --------------------------------------------------------
// The weight block (256 bits) is repeated in both halves; each half holds one token's activations.
// Every lane does exactly what the 256-bit tile's lane does, so results stay bit-identical to
// vec_dot while each instruction serves two (row, token) pairs.

template <class F, int P>  // P token pairs
struct ActivationPairs {
    __m512i q[P];
    __m512i bias[P];
    __m512 d[P];       // token 2p's scale in the low 8 lanes, token 2p+1's in the high 8
    __m256 s = _mm256_setzero_ps();  // lane t: token t's d * sum(q) (formats with a min)

    void load(const uint8_t* x, size_t x_row_bytes, size_t b) {
        float sums[8] = {};
        for (int p = 0; p < P; ++p) {
            const auto& x0 = reinterpret_cast<const typename F::ActBlock*>(x + (2 * p) * x_row_bytes)[b];
            const auto& x1 = reinterpret_cast<const typename F::ActBlock*>(x + (2 * p + 1) * x_row_bytes)[b];
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0.qs));
            const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1.qs));
            q[p] = _mm512_inserti64x4(_mm512_zextsi256_si512(q0), q1, 1);
            d[p] = _mm512_insertf32x8(_mm512_zextps256_ps512(_mm256_set1_ps(h2f(x0.d))), _mm256_set1_ps(h2f(x1.d)), 1);
            if constexpr (F::kOffset != 0) {
                const __m512i off = _mm512_set1_epi8(static_cast<char>(F::kOffset));
                bias[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, q[p]));
            } else {
                bias[p] = _mm512_setzero_si512();
            }
            if constexpr (F::kHasMin) {
                sums[2 * p] = h2f(x0.s);
                sums[2 * p + 1] = h2f(x1.s);
            }
        }
        if constexpr (F::kHasMin) s = _mm256_setr_ps(sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7]);
    }
};

template <class F, int R, int P>
void legacy_tile_zmm(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                     size_t x_row_bytes, size_t n) {
    static_assert(!signed_quants<F>(), "the 512-bit tile needs the exact u8 dot product");
    __m512 acc[R][P];
    __m256 mins[R];
    for (int r = 0; r < R; ++r) {
        mins[r] = _mm256_setzero_ps();
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    ActivationPairs<F, P> act;
    for (size_t b = 0; b < n / kQK32; ++b) {
        act.load(x, x_row_bytes, b);
        for (int r = 0; r < R; ++r) {
            const typename F::Block& wb = reinterpret_cast<const typename F::Block*>(w + r * w_row_bytes)[b];
            const __m512i u = _mm512_broadcast_i64x4(F::quants(wb));
            const __m512 dw = _mm512_set1_ps(h2f(wb.d));
            for (int p = 0; p < P; ++p) {
                const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(act.bias[p], u, act.q[p]));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, act.d[p]), dot, acc[r][p]);
            }
            if constexpr (F::kHasMin) mins[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(wb.m)), act.s, mins[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        alignas(32) float m[8];
        _mm256_store_ps(m, mins[r]);
        for (int p = 0; p < P; ++p) {
            const float lo = hsum_ps(_mm512_castps512_ps256(acc[r][p]));
            const float hi = hsum_ps(_mm512_extractf32x8_ps(acc[r][p], 1));
            y[(2 * p) * y_stride + r] = lo + (F::kHasMin ? m[2 * p] : 0.0f);
            y[(2 * p + 1) * y_stride + r] = hi + (F::kHasMin ? m[2 * p + 1] : 0.0f);
        }
    }
}

// The GemmTileFn of this tier: token pairs in zmm, an odd last token in a 256-bit tile.
template <class F>
void legacy_gemm_tile_zmm(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                          size_t x_row_bytes, size_t n, size_t n_tokens) {
    constexpr int R = static_cast<int>(kGemmTileRows);
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens >= 8) {
        legacy_tile_zmm<F, R, 4>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
        y += 8 * y_stride;
        xp += 8 * x_row_bytes;
        n_tokens -= 8;
    }
    if (n_tokens >= 4) {
        legacy_tile_zmm<F, R, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
        y += 4 * y_stride;
        xp += 4 * x_row_bytes;
        n_tokens -= 4;
    }
    if (n_tokens >= 2) {
        legacy_tile_zmm<F, R, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
        y += 2 * y_stride;
        xp += 2 * x_row_bytes;
        n_tokens -= 2;
    }
    if (n_tokens == 1) legacy_tile<F, R, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
}

}  // namespace

void register_avx512_kernels(CpuKernels& t) {
    t.isa_name = "avx512_vnni";
    register_legacy_tiles(t);
    t.gemm_tile[static_cast<size_t>(DType::Q4_0)] = legacy_gemm_tile_zmm<Q4_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_1)] = legacy_gemm_tile_zmm<Q4_1Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q5_0)] = legacy_gemm_tile_zmm<Q5_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q8_0)] = legacy_gemm_tile_zmm<Q8_0Format>;
    t.vec_dot[static_cast<size_t>(DType::Q5_K)] = vec_dot_q5_k;
    register_k_tiles(t);
    t.vec_dot[static_cast<size_t>(DType::F16)] = vec_dot_f16;
    t.vec_dot[static_cast<size_t>(DType::BF16)] = vec_dot_bf16;
    t.vec_dot[static_cast<size_t>(DType::F32)] = vec_dot_f32;
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}

}  // namespace cactus
