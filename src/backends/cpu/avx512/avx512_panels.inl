// 16-row panel products on 512-bit vectors (one row per 32-bit lane, one vpdpbusd per group of 4
// quants of 16 rows) for the AVX-512 VNNI table. Included inside the anonymous namespace of
// avx512_kernels.cpp after x86_panels.inl (layout, activation facts, panel_vec_dot).

constexpr size_t kPanelMaxTokens = 8;  // accumulators per call: 8 (+ 8 minimums) zmm

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
    register_panel<Q5_1Format>(t, DType::Q5_1);
    register_panel<Q8_0Format>(t, DType::Q8_0);
}
