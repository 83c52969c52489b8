// Row panels of the 32-element formats (Q4_0, Q4_1, Q5_0, Q8_0) for the AVX-512 VNNI table; the
// layout is described at PackPanelFn in cpu_kernels.h. Included inside the anonymous namespace of
// avx512_kernels.cpp after x86_gemm_tiles.inl (the Q*Format unpackers, kExactU8Dot == true).
//
// Accumulation order, shared by vec_dot and the panel product so they agree bit for bit: per block
// the exact int32 dot isum_b = sum_k q_k * x_k, then in block order
//   acc = fma(d_w * d_x, float(isum_b), acc)      acc_min = fma(m_w, s_x, acc_min)   (Q4_1)
// and the result acc (+ acc_min). In a panel the 16 lanes are 16 rows, so no lane ever sums
// partial products of another: the int32 dot finishes inside vpdpbusd.

constexpr size_t kPanelGroupBytes = kPanelRows * 4;         // one group of 4 quants of every row
constexpr size_t kPanelScaleOffset = 8 * kPanelGroupBytes;  // f32 d[kPanelRows]
constexpr size_t kPanelMinOffset = kPanelScaleOffset + kPanelRows * sizeof(float);
constexpr size_t kPanelMaxTokens = 8;  // accumulators per call: 8 (+ 8 minimums) zmm

// 8 int32 lanes summing to the exact dot of one weight block with one activation block.
template <class F>
inline __m256i block_dot_lanes(const typename F::Block& wb, const typename F::ActBlock& xb) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
    if constexpr (std::is_same<F, Q8_0Format>::value) {
        return dot_s8_s8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs)), xq);
    }
    const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), F::quants(wb), xq);
    if constexpr (F::kOffset == 0) return dot;
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(F::kOffset));
    return _mm256_sub_epi32(dot, _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset, xq));
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

template <class F>
void pack_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    const uint8_t* rows = static_cast<const uint8_t*>(w);
    for (size_t b = 0; b < n / kQK32; ++b, panel += kPanelBlockBytes) {
        float d[kPanelRows], m[kPanelRows];
        for (size_t r = 0; r < kPanelRows; ++r) {
            const typename F::Block& wb = reinterpret_cast<const typename F::Block*>(rows + r * w_row_bytes)[b];
            alignas(32) uint8_t u[kQK32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(u), F::quants(wb));
            for (size_t g = 0; g < 8; ++g) std::memcpy(panel + g * kPanelGroupBytes + 4 * r, u + 4 * g, 4);
            d[r] = h2f(wb.d);
            if constexpr (F::kHasMin) {
                m[r] = h2f(wb.m);
            } else {
                m[r] = 0.0f;
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
        act[b].unused = 0.0f;
    }
}

// int32 dot of 16 rows' block (8 groups of 4 quants) with one token's block, seeded with bias.
inline __m512i panel_block_dot(const __m512i* wq /* [8] */, const int8_t* xq, int32_t bias) {
    __m512i even = _mm512_set1_epi32(bias), odd = _mm512_setzero_si512();  // two dependency chains
    for (int g = 0; g < 8; g += 2) {
        int32_t x0, x1;
        std::memcpy(&x0, xq + 4 * g, 4);
        std::memcpy(&x1, xq + 4 * g + 4, 4);
        even = _mm512_dpbusd_epi32(even, wq[g], _mm512_set1_epi32(x0));
        odd = _mm512_dpbusd_epi32(odd, wq[g + 1], _mm512_set1_epi32(x1));
    }
    return _mm512_add_epi32(even, odd);
}

// y: [T] rows of y_stride, 16 outputs each  <-  panel [n_blocks] x T activation rows.
template <class F, int T>
void panel_tile(float* y, size_t y_stride, const uint8_t* panel, const uint8_t* x, size_t x_row_bytes,
                const PanelActBlock* act, size_t act_row_blocks, size_t n_blocks) {
    __m512 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b, panel += kPanelBlockBytes) {
        __m512i wq[8];
        for (int g = 0; g < 8; ++g) wq[g] = _mm512_loadu_si512(panel + g * kPanelGroupBytes);
        const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(panel + kPanelScaleOffset));
        for (int t = 0; t < T; ++t) {
            const typename F::ActBlock& xb = reinterpret_cast<const typename F::ActBlock*>(x + t * x_row_bytes)[b];
            const PanelActBlock& a = act[t * act_row_blocks + b];
            const __m512 dot = _mm512_cvtepi32_ps(panel_block_dot(wq, xb.qs, a.bias));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a.d)), dot, acc[t]);
            if constexpr (F::kHasMin) {
                const __m512 m = _mm512_loadu_ps(reinterpret_cast<const float*>(panel + kPanelMinOffset));
                acc_min[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(a.s), acc_min[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        _mm512_storeu_ps(y + t * y_stride, F::kHasMin ? _mm512_add_ps(acc[t], acc_min[t]) : acc[t]);
    }
}

template <class F>
void panel_gemm(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens) {
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    const size_t nb = n / kQK32;
    for (size_t t0 = 0; t0 < n_tokens; t0 += kPanelMaxTokens) {
        float* yt = y + t0 * y_stride;
        const uint8_t* xt = xp + t0 * x_row_bytes;
        const PanelActBlock* at = act + t0 * act_row_blocks;
        switch (std::min(kPanelMaxTokens, n_tokens - t0)) {
            case 1:
                panel_tile<F, 1>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 2:
                panel_tile<F, 2>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 3:
                panel_tile<F, 3>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 4:
                panel_tile<F, 4>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 5:
                panel_tile<F, 5>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 6:
                panel_tile<F, 6>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            case 7:
                panel_tile<F, 7>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
            default:
                panel_tile<F, 8>(yt, y_stride, panel, xt, x_row_bytes, at, act_row_blocks, nb);
                break;
        }
    }
}

template <class F>
void register_panel(CpuKernels& t, DType type) {
    const size_t i = static_cast<size_t>(type);
    t.vec_dot[i] = panel_vec_dot<F>;
    t.gemm_tile[i] = nullptr;  // the 4-row tiles accumulate in another order than panel_vec_dot
    t.pack_panel[i] = pack_panel<F>;
    t.panel_act[i] = panel_act<F>;
    t.panel_gemm[i] = panel_gemm<F>;
}

void register_panels(CpuKernels& t) {
    register_panel<Q4_0Format>(t, DType::Q4_0);
    register_panel<Q4_1Format>(t, DType::Q4_1);
    register_panel<Q5_0Format>(t, DType::Q5_0);
    register_panel<Q8_0Format>(t, DType::Q8_0);
}
