// 512-bit tiles of the 32-element formats, two tokens per zmm (Q4_1 in the AVX-512 VNNI table).
// Included inside the anonymous namespace of avx512_kernels.cpp after x86_gemm_tiles.inl.
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

