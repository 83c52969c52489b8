// 512-bit panel product of the K-quant formats (Q4_K, Q5_K, Q6_K) for the AVX-512 VNNI table. The
// table keeps the AVX2 table's K panels (packing, activation facts, vec_dot, decode; layout in
// x86_k_panel_layout.h) and multiplies them here with all 16 rows of a panel in one zmm, where the
// AVX2 product takes two halves of 8: every lane (row) does the same operations as the AVX2
// k_half_panel_tile, in the same order, so the results are equal bit for bit. Included inside the
// anonymous namespace of avx512_kernels.cpp.

constexpr size_t kKPanelMaxTokens = 4;  // accumulators per call: 4 (+ 4 minimums) zmm

// The int16 scale pairs of groups g0.. of chunk c, lane r = row r (see k_panel_scale in
// avx2_k_panels.inl; vpshufb works per 128-bit lane, so the AVX2 byte pattern repeats).
template <class F>
inline __m512i k_panel_scale_zmm(const uint8_t* sb, int c, int g0) {
    const __m512i words = _mm512_loadu_si512(sb + kKScaleOffset + 64 * c);
    if constexpr (F::kHasMins) return words;
    const __m512i dword_base = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
    return _mm512_shuffle_epi8(words, _mm512_add_epi8(dword_base, _mm512_set1_epi32(g0 < 4 ? 0x01000100 : 0x03020302)));
}

// Per row the mins dot (Q4_K/Q5_K): sum over the 4 int16-pair fields of madd(field_k, bias_k).
inline __m512i k_panel_mins_dot_zmm(const uint8_t* field, const PanelActBlock* a) {
    __m512i sum = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
        sum =
            _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_loadu_si512(field + 64 * k), _mm512_set1_epi32(a[k].bias)));
    }
    return sum;
}

// Int32 lanes (lane r = row r) of isum of T tokens' super-block (xq[t], a[t]: token t's quants and
// 8 facts): each group of 16 rows is loaded once for the T tokens.
template <class F, int T>
inline void k_panel_isums_zmm(const uint8_t* sb, const int8_t* const* xq, const PanelActBlock* const* a,
                              __m512i* isum /* [T] */) {
    // At most 4 groups per int16 sum (Q4_K allows 8; measured faster with 4 tokens; the same integers)
    constexpr int G = F::kGroupsPerSum < 4 ? F::kGroupsPerSum : 4;
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
        for (int g0 = 0; g0 < 8; g0 += G) {
            __m512i pairs[T];
            for (int t = 0; t < T; ++t) pairs[t] = _mm512_setzero_si512();
            for (int g = g0; g < g0 + G; ++g) {
                const __m512i w = _mm512_loadu_si512(sb + (8 * c + g) * kPanelGroupBytes);
                for (int t = 0; t < T; ++t) {
                    int32_t x4;
                    std::memcpy(&x4, xq[t] + 32 * c + 4 * g, 4);
                    pairs[t] = _mm512_add_epi16(pairs[t], _mm512_maddubs_epi16(w, _mm512_set1_epi32(x4)));
                }
            }
            const __m512i scale = k_panel_scale_zmm<F>(sb, c, g0);
            for (int t = 0; t < T; ++t) {
                if constexpr (!F::kHasMins) {  // Q6_K: (q - 32) x
                    pairs[t] = _mm512_sub_epi16(pairs[t], _mm512_set1_epi32(g0 < 4 ? a[t][c].bias : a[t][c].bias2));
                }
                isum[t] = _mm512_add_epi32(isum[t], _mm512_madd_epi16(pairs[t], scale));
            }
        }
    }
}

// y: [T] rows of y_stride, 16 outputs each  <-  one K panel [n_sb] x T activation rows.
template <class F, int T>
void k_panel_tile_zmm(float* y, size_t y_stride, const uint8_t* panel, const uint8_t* x, size_t x_row_bytes,
                      const PanelActBlock* act, size_t act_row_blocks, size_t n_sb) {
    __m512 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, panel += kKPanelBytes) {
        const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(panel + kKDOffset));
        const int8_t* xq[T];
        const PanelActBlock* a[T];
        for (int t = 0; t < T; ++t) {
            xq[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes)[sb].qs;
            a[t] = act + t * act_row_blocks + 8 * sb;
        }
        __m512i isum[T];
        k_panel_isums_zmm<F, T>(panel, xq, a, isum);
        for (int t = 0; t < T; ++t) {
            const __m512 dx = _mm512_set1_ps(a[t][0].d);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            if constexpr (F::kHasMins) {
                const __m512 dmin = _mm512_loadu_ps(reinterpret_cast<const float*>(panel + kKDminOffset));
                const __m512i mdot = k_panel_mins_dot_zmm(panel + kKMinOffset, a[t]);
                acc_min[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(mdot), acc_min[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        _mm512_storeu_ps(y + t * y_stride, F::kHasMins ? _mm512_sub_ps(acc[t], acc_min[t]) : acc[t]);
    }
}

template <class F>
void k_panel_gemm_zmm(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                      const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens) {
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    const size_t n_sb = n / kQKK;
    for (size_t t0 = 0; t0 < n_tokens; t0 += kKPanelMaxTokens) {
        float* yt = y + t0 * y_stride;
        const uint8_t* xt = xp + t0 * x_row_bytes;
        const PanelActBlock* at = act + t0 * act_row_blocks;
        switch (std::min(kKPanelMaxTokens, n_tokens - t0)) {
            case 1:
                k_panel_tile_zmm<F, 1>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, n_sb);
                break;
            case 2:
                k_panel_tile_zmm<F, 2>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, n_sb);
                break;
            case 3:
                k_panel_tile_zmm<F, 3>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, n_sb);
                break;
            default:
                k_panel_tile_zmm<F, 4>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, n_sb);
                break;
        }
    }
}

// Replaces the panel product of the K panels inherited from the AVX2 table (the rest stays theirs).
void register_k_panels_zmm(CpuKernels& t) {
    const PanelGemmFn gemms[] = {k_panel_gemm_zmm<Q4_KPanelFacts>, k_panel_gemm_zmm<Q5_KPanelFacts>,
                                 k_panel_gemm_zmm<Q6_KPanelFacts>};
    const DType types[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};
    for (size_t k = 0; k < 3; ++k) {
        const size_t i = static_cast<size_t>(types[k]);
        CACTUS_ASSERT(t.pack_panel[i] != nullptr);  // the AVX2 K panels this product reads
        t.panel_gemm[i] = gemms[k];
    }
}
