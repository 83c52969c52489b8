// 512-bit register tiles of the K-quant formats (Q4_K, Q5_K, Q6_K) with Q8_K activations, for the
// AVX-512 VNNI table. Included inside the anonymous namespace of avx512_kernels.cpp after
// x86_quant_kernels.inl (unpack_k_scales_sse, h2f).
//
// A super-block of 256 is 8 chunks of 32 quants; one zmm holds a pair of chunks (2j, 2j+1), so a
// super-block is 4 steps. Per step and (row, token): maddubs(q, x) gives int16 pair sums (no
// saturation: q <= 63, |x| <= 127), and vpdpwssd multiplies them by the chunk's int16 scales and
// accumulates into int32 lanes in one instruction.
//   Q6_K: q - 32 is never formed; the offset is -32 * sum_i scale_i * bsums_i (Q8_K's bsums are
//         sums over 16 elements, exactly Q6_K's scale groups): one vpdpwssd per (row, token).
//   Q4_K/Q5_K: the mins term dmin * sum_j min_j * (bsums[2j] + bsums[2j+1]) is done for four tokens
//         at once (one vpmaddwd per row).
// At the end of a super-block the int32 lanes of four tokens are folded into one vector, lane
// 4k + t holding token t's partial sum of 128-bit lane k, converted to float and scaled there
// (float accumulators: one zmm per row and token quad). Every lane's arithmetic depends only on
// its own (row, token), so a tile gives the same bits as the 1x1 tile used as vec_dot.

// ---- activations of up to 4 * Q tokens for one super-block ---------------------------------------

template <int T>
struct KTokens {
    static constexpr int Q = (T + 3) / 4;
    const BlockQ8_K* b[T];
    __m512 d[Q];       // lane 4k + t: token 4q + t's scale (0 past T)
    __m512i pairs[Q];  // int32 lane 4k + t: token 4q + t's (bsums[4k] + bsums[4k+1], bsums[4k+2] + bsums[4k+3])

    void load(const uint8_t* x, size_t x_row_bytes, size_t sb, bool with_pairs) {
        for (int t = 0; t < T; ++t) b[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + sb;
        for (int q = 0; q < Q; ++q) {
            d[q] = _mm512_setzero_ps();
            __m512i by_token = _mm512_setzero_si512();  // 128-bit lane t: token 4q + t's 8 pair sums
            for (int t = 4 * q; t < std::min(T, 4 * q + 4); ++t) {
                d[q] = _mm512_mask_broadcastss_ps(d[q], static_cast<__mmask16>(0x1111 << (t - 4 * q)),
                                                  _mm_set_ss(b[t]->d));
                if (!with_pairs) continue;
                const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[t]->bsums));
                const __m128i p = _mm_hadd_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                by_token = _mm512_mask_broadcast_i32x4(by_token, static_cast<__mmask16>(0xF << (4 * (t - 4 * q))), p);
            }
            // lane 4k + t <- lane 4t + k (a 4x4 transpose of int32)
            const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            pairs[q] = _mm512_permutexvar_epi32(transpose, by_token);
        }
    }
    __m512i chunk_pair(int t, int j) const {
        return _mm512_loadu_si512(reinterpret_cast<const void*>(b[t]->qs + 64 * j));
    }
    __m512i bsums(int t) const {  // 16 int16 in the low half
        return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[t]->bsums)));
    }
};

// ---- weight formats: one row's super-block ---------------------------------------------------------

// Bytes 0..7 of unpack_k_scales (scales) as int16 lanes: pair j gets s[2j] in lanes 0..15 and
// s[2j+1] in lanes 16..31; the mins as int32 lane 4k + t = (min[2k], min[2k+1]).
struct KScalesMins {
    __m512i scales8;  // low 8 int16 lanes: the 8 scales
    __m512i mins;
    float d, dmin;

    void load(const uint8_t* packed, uint16_t d_half, uint16_t dmin_half) {
        const __m128i bytes = unpack_k_scales_sse(packed);
        scales8 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(bytes));
        const __m512i mins16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8)));
        mins = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), mins16);
        d = h2f(d_half);
        dmin = h2f(dmin_half);
    }
    __m512i scales16(int j) const {
        const __m512i idx =
            _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(2 * j)), _mm512_maskz_set1_epi16(0xFFFF0000u, 1));
        return _mm512_permutexvar_epi16(idx, scales8);
    }
    // acc += d_x * (d * isum - dmin * mins . pair sums), per lane 4k + t
    __m512 finish(__m512 acc, __m512i isum, __m512 dx, __m512i pairs) const {
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, _mm512_set1_ps(d)), acc);
        const __m512i mdot = _mm512_madd_epi16(mins, pairs);
        return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mdot), _mm512_mul_ps(dx, _mm512_set1_ps(dmin)), acc);
    }
};

// Chunk pair j of 4-bit quants: low nibbles of qs[32j..] (chunk 2j) and their high nibbles (2j+1).
inline __m512i k_nibble_pair(const uint8_t* qs, int j) {
    const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j)));
    const __m512i shifts = _mm512_maskz_set1_epi16(0xFFFF0000u, 4);
    return _mm512_and_si512(_mm512_srlv_epi16(bits, shifts), _mm512_set1_epi8(0x0F));
}

struct Q4_KZmm {
    using Block = BlockQ4_K;
    static constexpr bool kHasMins = true;
    struct Row {
        const Block* b;
        KScalesMins sm;
        void load(const Block* block) {
            b = block;
            sm.load(block->scales, block->d, block->dmin);
        }
        __m512i start(__m512i) const { return _mm512_setzero_si512(); }
        __m512i quants(int j) const { return k_nibble_pair(b->qs, j); }
        __m512i scales16(int j) const { return sm.scales16(j); }
        __m512 finish(__m512 acc, __m512i isum, __m512 dx, __m512i pairs) const {
            return sm.finish(acc, isum, dx, pairs);
        }
    };
};

struct Q5_KZmm {
    using Block = BlockQ5_K;
    static constexpr bool kHasMins = true;
    struct Row {
        const Block* b;
        KScalesMins sm;
        __m512i high;  // qh in both halves
        void load(const Block* block) {
            b = block;
            sm.load(block->scales, block->d, block->dmin);
            high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qh)));
        }
        __m512i start(__m512i) const { return _mm512_setzero_si512(); }
        // chunk c takes bit c of each qh byte as its bit 4
        __m512i quants(int j) const {
            const __m512i shifts = _mm512_mask_set1_epi16(_mm512_set1_epi16(static_cast<short>(2 * j)), 0xFFFF0000u,
                                                          static_cast<short>(2 * j + 1));
            const __m512i h = _mm512_slli_epi16(_mm512_srlv_epi16(high, shifts), 4);
            // low | (h & 0x10)
            return _mm512_ternarylogic_epi32(k_nibble_pair(b->qs, j), h, _mm512_set1_epi8(0x10), 0xF8);
        }
        __m512i scales16(int j) const { return sm.scales16(j); }
        __m512 finish(__m512 acc, __m512i isum, __m512 dx, __m512i pairs) const {
            return sm.finish(acc, isum, dx, pairs);
        }
    };
};

struct Q6_KZmm {
    using Block = BlockQ6_K;
    static constexpr bool kHasMins = false;
    struct Row {
        const Block* b;
        __m512i scales;        // the 16 int8 scales as int16 (low half)
        __m512i neg32_scales;  // -32 * scales (low half), for the offset term
        float d;
        void load(const Block* block) {
            b = block;
            const __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block->scales)));
            scales = _mm512_castsi256_si512(s);
            neg32_scales = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 5)));
            d = h2f(block->d);
        }
        // -32 * sum_i scale_i * bsums_i, spread over int32 lanes 0..7
        __m512i start(__m512i bsums) const { return _mm512_dpwssd_epi32(_mm512_setzero_si512(), neg32_scales, bsums); }
        // chunk c = 4 * half + k: low 4 bits from ql[64 half + 32 (k & 1)] (high nibble when k >= 2),
        // high 2 bits from bits 2k, 2k + 1 of qh[32 half]
        __m512i quants(int j) const {
            const int half = j / 2;
            const __m512i ql = _mm512_loadu_si512(reinterpret_cast<const void*>(b->ql + 64 * half));
            const __m512i low = _mm512_and_si512(j & 1 ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * half)));
            // bits (2k, 2k+1) -> (4, 5): k = 0, 1 shift left by 4, 2; k = 2, 3 shift right by 0, 2
            const __m512i h = j & 1
                                  ? _mm512_srlv_epi16(qh, _mm512_maskz_set1_epi16(0xFFFF0000u, 2))
                                  : _mm512_sllv_epi16(qh, _mm512_mask_set1_epi16(_mm512_set1_epi16(4), 0xFFFF0000u, 2));
            return _mm512_ternarylogic_epi32(low, h, _mm512_set1_epi8(0x30), 0xF8);
        }
        // lane l of pair j: scale 4j + l / 8
        __m512i scales16(int j) const {
            const __m512i group = _mm512_setr_epi64(0, 0, 0x0001000100010001, 0x0001000100010001, 0x0002000200020002,
                                                    0x0002000200020002, 0x0003000300030003, 0x0003000300030003);
            const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(4 * j)), group);
            return _mm512_permutexvar_epi16(idx, scales);
        }
        __m512 finish(__m512 acc, __m512i isum, __m512 dx, __m512i) const {
            return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, _mm512_set1_ps(d)), acc);
        }
    };
};

// ---- the tile ------------------------------------------------------------------------------------

// Four tokens' int32 lanes -> lane 4k + t = sum of token t's lanes 4k .. 4k+3 (missing tokens: 0).
template <int T>
inline __m512i fold_token_quad(const __m512i* acc, int first) {
    auto at = [&](int t) { return first + t < T ? acc[first + t] : _mm512_setzero_si512(); };
    const __m512i a0 = at(0), a1 = at(1), a2 = at(2), a3 = at(3);
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// Lane t of the result: sum over k of lane 4k + t (fixed order for every tile shape).
inline __m128 fold_lanes(__m512 v) {
    const __m128 l0 = _mm512_castps512_ps128(v), l1 = _mm512_extractf32x4_ps(v, 1);
    const __m128 l2 = _mm512_extractf32x4_ps(v, 2), l3 = _mm512_extractf32x4_ps(v, 3);
    return _mm_add_ps(_mm_add_ps(l0, l1), _mm_add_ps(l2, l3));
}

// y[t * y_stride + r] for r < R, t < T (T tokens as ceil(T / 4) quads)
template <class F, int R, int T>
void k_tile_zmm(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes,
                size_t n) {
    constexpr int Q = (T + 3) / 4;
    __m512 acc_f[R][Q];
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < Q; ++q) acc_f[r][q] = _mm512_setzero_ps();
    }
    for (size_t sb = 0; sb < n / kQKK; ++sb) {
        KTokens<T> tok;
        tok.load(x, x_row_bytes, sb, F::kHasMins);
        typename F::Row rows[R];
        __m512i acc[R][T];
        for (int r = 0; r < R; ++r) {
            rows[r].load(reinterpret_cast<const typename F::Block*>(w + r * w_row_bytes) + sb);
            for (int t = 0; t < T; ++t) acc[r][t] = rows[r].start(F::kHasMins ? _mm512_setzero_si512() : tok.bsums(t));
        }
        for (int j = 0; j < 4; ++j) {
            for (int r = 0; r < R; ++r) {
                const __m512i q = rows[r].quants(j);
                const __m512i s16 = rows[r].scales16(j);
                for (int t = 0; t < T; ++t) {
                    acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], s16, _mm512_maddubs_epi16(q, tok.chunk_pair(t, j)));
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int q = 0; q < Q; ++q) {
                acc_f[r][q] = rows[r].finish(acc_f[r][q], fold_token_quad<T>(acc[r], 4 * q), tok.d[q], tok.pairs[q]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < Q; ++q) {
            alignas(16) float s[4];
            _mm_store_ps(s, fold_lanes(acc_f[r][q]));
            for (int t = 4 * q; t < std::min(T, 4 * q + 4); ++t) y[t * y_stride + r] = s[t - 4 * q];
        }
    }
}

template <class F>
float k_vec_dot_zmm(const void* w, const void* x, size_t n) {
    float y;
    k_tile_zmm<F, 1, 1>(&y, 1, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n);
    return y;
}

// The GemmTileFn: 8 tokens as two row pairs x 8 tokens (each row's unpacking serves 8 tokens);
// fewer tokens as 4 rows x 4 tokens and 4 rows x the rest.
template <class F>
void k_gemm_tile_zmm(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x, size_t x_row_bytes,
                     size_t n, size_t n_tokens) {
    static_assert(kGemmTileRows == 4, "the tile shapes below cover 4 rows");
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens >= 8) {
        k_tile_zmm<F, 2, 8>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
        k_tile_zmm<F, 2, 8>(y + 2, y_stride, wp + 2 * w_row_bytes, w_row_bytes, xp, x_row_bytes, n);
        y += 8 * y_stride;
        xp += 8 * x_row_bytes;
        n_tokens -= 8;
    }
    if (n_tokens >= 4) {
        k_tile_zmm<F, 4, 4>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
        y += 4 * y_stride;
        xp += 4 * x_row_bytes;
        n_tokens -= 4;
    }
    switch (n_tokens) {
        case 1:
            k_tile_zmm<F, 4, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
            break;
        case 2:
            k_tile_zmm<F, 4, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
            break;
        case 3:
            k_tile_zmm<F, 4, 3>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
            break;
        default:
            break;
    }
}

void register_k_tiles_zmm(CpuKernels& t) {
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {  // inherited from the AVX2 table
        const size_t i = static_cast<size_t>(type);
        t.pack_panel[i] = nullptr;
        t.panel_act[i] = nullptr;
        t.panel_gemm[i] = nullptr;
        t.panel_decode[i] = nullptr;  // one token goes row by row through vec_dot (see matmul_rows)
    }
    t.vec_dot[static_cast<size_t>(DType::Q4_K)] = k_vec_dot_zmm<Q4_KZmm>;
    t.vec_dot[static_cast<size_t>(DType::Q5_K)] = k_vec_dot_zmm<Q5_KZmm>;
    t.vec_dot[static_cast<size_t>(DType::Q6_K)] = k_vec_dot_zmm<Q6_KZmm>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_K)] = k_gemm_tile_zmm<Q4_KZmm>;
    t.gemm_tile[static_cast<size_t>(DType::Q5_K)] = k_gemm_tile_zmm<Q5_KZmm>;
    t.gemm_tile[static_cast<size_t>(DType::Q6_K)] = k_gemm_tile_zmm<Q6_KZmm>;
}
