// 16-row panel products on 256-bit vectors for the AVX2 table: a panel is two halves of 8 rows, one
// row per 32-bit lane. Per token and block, each group of 4 quants of 8 rows is one vpmaddubsw
// against the token's 4 activation bytes broadcast to every lane; the int16 pair sums of several
// groups are added before one vpmaddwd widens them (as many as stay below 2^15, see below), so the
// int32 dot of a block is exact and the float work (convert, scale, accumulate) is one instruction
// per 8 (row, token) pairs. Included inside the anonymous namespace of avx2_kernels.cpp after
// x86_panels.inl (layout, activation facts, panel_vec_dot: the shared accumulation order).

constexpr size_t kHalfRows = 8;         // rows per 256-bit vector
constexpr size_t kPanel8MaxTokens = 4;  // accumulators per call: 4 (+ 4 minimums) ymm

// Groups of 4 quants whose maddubs pair sums may be added in int16 without reaching 2^15, with
// activations in [-127, 127]: 16 products of 4-bit quants (16 * 15 * 127 = 30,480), 8 of 5-bit
// quants (8 * 31 * 127 = 31,496). (Signed Q8_0 goes through half_block_dots_signed.)
template <class F>
constexpr int groups_per_i16_sum() {
    if constexpr (five_bit_format<F>()) return 4;
    return 8;
}

// Unsigned quants: the int32 dot of one block of 8 rows (groups at stride kPanelGroupBytes) with one
// token's 32 quants, seeded with the token's offset bias: lane r = row r.
template <class F>
inline __m256i half_block_dot(const uint8_t* wq, const int8_t* xq, __m256i acc) {
    constexpr int kGroups = groups_per_i16_sum<F>();
    for (int g0 = 0; g0 < 8; g0 += kGroups) {
        __m256i pairs = _mm256_setzero_si256();
        for (int g = g0; g < g0 + kGroups; ++g) {
            int32_t x4;
            std::memcpy(&x4, xq + 4 * g, 4);
            const __m256i x = _mm256_set1_epi32(x4);
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + g * kPanelGroupBytes));
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w, x));
        }
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
    return acc;
}

// Signed quants (Q8_0): the int32 dots of one block of 8 rows with T tokens, seeded with acc[t]. Each
// group is loaded and made absolute once for the T tokens; per token the sign trick then costs one
// vpsignb (the activation takes the weight's sign) before vpmaddubsw and a vpmaddwd per group (|q| <=
// 128: one group's pair sums reach 32,512, so no two groups share an int16 sum). Each acc[t] is
// added to in order: left alone GCC 12 computed the 32 products of a block first, spilled them and
// summed them as a tree; the empty asm (no instruction) keeps each sum in its register, about 15%
// faster at 512 tokens (`matmul_bench Q8_0 1536 8960 512 1`).
template <int T>
inline void half_block_dots_signed(const uint8_t* wq, const int8_t* const* xq, __m256i* acc /* [T] */) {
    for (int g = 0; g < 8; ++g) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + g * kPanelGroupBytes));
        const __m256i w_abs = _mm256_sign_epi8(w, w);
        for (int t = 0; t < T; ++t) {
            int32_t x4;
            std::memcpy(&x4, xq[t] + 4 * g, 4);
            const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(_mm256_set1_epi32(x4), w));
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
            asm("" : "+x"(acc[t]));
        }
    }
}

// y: [T] rows of y_stride, 8 outputs each  <-  one panel half [n_blocks] x T activation rows.
// half: the panel's first byte plus 32 * h (groups, scales and minimums all shift by 32 per half).
template <class F, int T>
void half_panel_tile(float* y, size_t y_stride, const uint8_t* half, const uint8_t* x, size_t x_row_bytes,
                     const PanelActBlock* act, size_t act_row_blocks, size_t n_blocks) {
    __m256 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b, half += kPanelBlockBytes) {
        const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(half + kPanelScaleOffset));
        __m256i isums[T];
        if constexpr (signed_quants<F>()) {
            const int8_t* xq[T];
            for (int t = 0; t < T; ++t) {
                xq[t] = reinterpret_cast<const typename F::ActBlock*>(x + t * x_row_bytes)[b].qs;
                isums[t] = _mm256_set1_epi32(act[t * act_row_blocks + b].bias);
            }
            half_block_dots_signed<T>(half, xq, isums);
        }
        for (int t = 0; t < T; ++t) {
            const typename F::ActBlock& xb = reinterpret_cast<const typename F::ActBlock*>(x + t * x_row_bytes)[b];
            const PanelActBlock& a = act[t * act_row_blocks + b];
            __m256i isum;
            if constexpr (signed_quants<F>()) {
                isum = isums[t];
            } else {
                // groups reloaded from L1 per token (an empty asm hides that they are the same): GCC
                // 12 otherwise keeps the 8 groups in registers across the T tokens and spills the
                // accumulators: 5-8% slower Q5_0 / Q5_1 at 512 tokens, 1-2% Q4_0 (matmul_bench TYPE
                // 1536 8960 512 1)
                const uint8_t* groups = half;
                asm("" : "+r"(groups));
                isum = half_block_dot<F>(groups, xb.qs, _mm256_set1_epi32(a.bias));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a.d)), _mm256_cvtepi32_ps(isum), acc[t]);
            if constexpr (F::kHasMin) {
                const __m256 m = _mm256_loadu_ps(reinterpret_cast<const float*>(half + kPanelMinOffset));
                acc_min[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(a.s), acc_min[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * y_stride, F::kHasMin ? _mm256_add_ps(acc[t], acc_min[t]) : acc[t]);
    }
}

template <class F>
void panel8_gemm(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                 const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens) {
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    const size_t nb = n / kQK32;
    for (size_t h = 0; h < kPanelRows / kHalfRows; ++h) {
        const uint8_t* half = panel + 32 * h;
        for (size_t t0 = 0; t0 < n_tokens; t0 += kPanel8MaxTokens) {
            float* yt = y + t0 * y_stride + kHalfRows * h;
            const uint8_t* xt = xp + t0 * x_row_bytes;
            const PanelActBlock* at = act + t0 * act_row_blocks;
            switch (std::min(kPanel8MaxTokens, n_tokens - t0)) {
                case 1:
                    half_panel_tile<F, 1>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, nb);
                    break;
                case 2:
                    half_panel_tile<F, 2>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, nb);
                    break;
                case 3:
                    half_panel_tile<F, 3>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, nb);
                    break;
                default:
                    half_panel_tile<F, 4>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, nb);
                    break;
            }
        }
    }
}

template <class F>
void register_panel8(CpuKernels& t, DType type) {
    const size_t i = static_cast<size_t>(type);
    t.vec_dot[i] = panel_vec_dot<F>;
    t.gemm_tile[i] = nullptr;  // the 4-row tiles accumulate in another order than panel_vec_dot
    t.pack_panel[i] = pack_panel<F>;
    t.panel_act[i] = panel_act<F>;
    t.panel_gemm[i] = panel8_gemm<F>;
}

void register_panels(CpuKernels& t) {
    register_panel8<Q4_0Format>(t, DType::Q4_0);
    register_panel8<Q4_1Format>(t, DType::Q4_1);
    register_panel8<Q5_0Format>(t, DType::Q5_0);
    register_panel8<Q5_1Format>(t, DType::Q5_1);
    register_panel8<Q8_0Format>(t, DType::Q8_0);
}
