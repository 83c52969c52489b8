// Row panels of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), shared by the AVX2 and AVX-512
// VNNI tables: the panel layout (PackPanelFn in cpu_kernels.h), the per-token activation facts and
// the one-row dot product in the panels' order. Included inside the anonymous namespace of
// avx2_kernels.cpp / avx512_kernels.cpp after x86_gemm_tiles.inl (the Q*Format unpackers).
//
// Accumulation order, shared by vec_dot and the panel product so they agree bit for bit: per block
// the exact int32 dot isum_b = sum_k q_k * x_k, then in block order
//   acc = fma(d_w * d_x, float(isum_b), acc)      acc_min = fma(m_w, s_x, acc_min)   (Q4_1, Q5_1)
// and the result acc (+ acc_min). In a panel the lanes are rows, so no lane ever sums partial
// products of another row: the int32 dot of a block is exact however it is computed.

// 8 int32 lanes summing to the exact dot of one weight block with one activation block.
template <class F>
inline __m256i block_dot_lanes(const typename F::Block& wb, const typename F::ActBlock& xb) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
    if constexpr (std::is_same<F, Q8_0Format>::value) {
        return dot_s8_s8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs)), xq);
    }
    const __m256i dot = dot_u8_s8(_mm256_setzero_si256(), F::quants(wb), xq);
    if constexpr (F::kOffset == 0) return dot;
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(F::kOffset));
    return _mm256_sub_epi32(dot, dot_u8_s8(_mm256_setzero_si256(), offset, xq));
}

// The exact int32 dots of 4 consecutive blocks, as floats: one horizontal reduction for the four.
template <class F>
inline __m128 four_block_dots(const typename F::Block* wb, const typename F::ActBlock* xb) {
    const __m256i d01 = _mm256_hadd_epi32(block_dot_lanes<F>(wb[0], xb[0]), block_dot_lanes<F>(wb[1], xb[1]));
    const __m256i d23 = _mm256_hadd_epi32(block_dot_lanes<F>(wb[2], xb[2]), block_dot_lanes<F>(wb[3], xb[3]));
    const __m256i d = _mm256_hadd_epi32(d01, d23);  // [lane k: half of block k's sum] x 2 halves
    return _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1)));
}

template <class F>
inline void accumulate_block(const typename F::Block& wb, const typename F::ActBlock& xb, float dot, float& acc,
                             float& acc_min) {
    acc = std::fma(h2f(wb.d) * h2f(xb.d), dot, acc);
    if constexpr (F::kHasMin) acc_min = std::fma(h2f(wb.m), h2f(xb.s), acc_min);
}

template <class F>
float panel_vec_dot(const void* w, const void* x, size_t n) {
    const typename F::Block* wb = static_cast<const typename F::Block*>(w);
    const typename F::ActBlock* xb = static_cast<const typename F::ActBlock*>(x);
    const size_t n_blocks = n / kQK32;
    float acc = 0.0f, acc_min = 0.0f;
    size_t b = 0;
    for (; b + 4 <= n_blocks; b += 4) {
        // halves of 4 blocks: weight scales, activation scales (and minimums, activation sums)
        const __m256 ds = _mm256_cvtph_ps(_mm_setr_epi16(
            static_cast<short>(wb[b].d), static_cast<short>(wb[b + 1].d), static_cast<short>(wb[b + 2].d),
            static_cast<short>(wb[b + 3].d), static_cast<short>(xb[b].d), static_cast<short>(xb[b + 1].d),
            static_cast<short>(xb[b + 2].d), static_cast<short>(xb[b + 3].d)));
        alignas(16) float dots[4], scales[4];
        _mm_store_ps(dots, four_block_dots<F>(wb + b, xb + b));
        _mm_store_ps(scales, _mm_mul_ps(_mm256_castps256_ps128(ds), _mm256_extractf128_ps(ds, 1)));
        for (size_t k = 0; k < 4; ++k) acc = std::fma(scales[k], dots[k], acc);
        if constexpr (F::kHasMin) {
            alignas(32) float ms[8];
            _mm256_store_ps(
                ms, _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(wb[b].m), static_cast<short>(wb[b + 1].m),
                                                   static_cast<short>(wb[b + 2].m), static_cast<short>(wb[b + 3].m),
                                                   static_cast<short>(xb[b].s), static_cast<short>(xb[b + 1].s),
                                                   static_cast<short>(xb[b + 2].s), static_cast<short>(xb[b + 3].s))));
            for (size_t k = 0; k < 4; ++k) acc_min = std::fma(ms[k], ms[4 + k], acc_min);
        }
    }
    for (; b < n_blocks; ++b) {
        const float dot = static_cast<float>(hsum_epi32(block_dot_lanes<F>(wb[b], xb[b])));
        accumulate_block<F>(wb[b], xb[b], dot, acc, acc_min);
    }
    return F::kHasMin ? acc + acc_min : acc;
}

// 8 rows' 32 quants (u[r]: 8 dwords of 4 quants) -> out[g]: dword g of the 8 rows (an 8 x 8 dword
// transpose: group g of a panel half).
inline void transpose_8x8_dwords(const __m256i* u, __m256i* out) {
    __m256i t[8], s[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(u[2 * i], u[2 * i + 1]);      // rows 2i, 2i+1: groups 0, 1 | 4, 5
        t[2 * i + 1] = _mm256_unpackhi_epi32(u[2 * i], u[2 * i + 1]);  // groups 2, 3 | 6, 7
    }
    for (int i = 0; i < 2; ++i) {                                          // rows 4i..4i+3
        s[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);      // group 0 | 4
        s[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);      // group 1 | 5
        s[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);  // group 2 | 6
        s[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);  // group 3 | 7
    }
    for (int g = 0; g < 4; ++g) {
        out[g] = _mm256_permute2x128_si256(s[g], s[4 + g], 0x20);
        out[g + 4] = _mm256_permute2x128_si256(s[g], s[4 + g], 0x31);
    }
}

template <class F>
void pack_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    const uint8_t* rows = static_cast<const uint8_t*>(w);
    for (size_t b = 0; b < n / kQK32; ++b, panel += kPanelBlockBytes) {
        alignas(32) float d[kPanelRows], m[kPanelRows];
        for (size_t half = 0; half < kPanelRows / 8; ++half) {
            __m256i u[8], groups[8];
            for (size_t r = 0; r < 8; ++r) {
                const size_t row = 8 * half + r;
                const typename F::Block& wb = reinterpret_cast<const typename F::Block*>(rows + row * w_row_bytes)[b];
                u[r] = F::quants(wb);
                d[row] = h2f(wb.d);
                if constexpr (F::kHasMin) {
                    m[row] = h2f(wb.m);
                } else {
                    m[row] = 0.0f;
                }
            }
            transpose_8x8_dwords(u, groups);
            for (size_t g = 0; g < 8; ++g) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel + g * kPanelGroupBytes + 32 * half), groups[g]);
            }
        }
        std::memcpy(panel + kPanelScaleOffset, d, sizeof(d));
        std::memcpy(panel + kPanelMinOffset, m, sizeof(m));
    }
}

template <class F>
void panel_act(PanelActBlock* act, const void* x, size_t n) {
    const typename F::ActBlock* xb = static_cast<const typename F::ActBlock*>(x);
    for (size_t b = 0; b < n / kQK32; ++b) {
        int32_t sum = 0;
        for (size_t k = 0; k < kQK32; ++k) sum += xb[b].qs[k];
        act[b].d = h2f(xb[b].d);
        act[b].bias = -F::kOffset * sum;
        if constexpr (F::kHasMin) {
            act[b].s = h2f(xb[b].s);
        } else {
            act[b].s = 0.0f;
        }
        act[b].bias2 = 0;
    }
}
