// One-token decode of the repacked K layouts (Q6_K_X8, ops/q6_k_x8.h) at 512 bits for the AVX-512
// VNNI table: the group's one sequential stream, which reads faster from memory than the GGUF
// layout's 8 rows side by side, with the vector work of the 512-bit GGUF decode
// (avx512_k_decode.inl: vpdpbusd, vpackssdw, one vpdpwssd per two vectors of sums). The int32
// isum of a super-block is exact and the float step is the AVX2 group decode's, so the result
// equals the file type's vec_dot bit for bit (tests/ops/repacked_layouts_test.cpp). Included inside
// the anonymous namespace of avx512_kernels.cpp, after avx512_k_decode.inl.

// ---- Q6_K_X8 --------------------------------------------------------------------------------------
// A row's 192 quant bytes are raw vectors r0..r5 of 32 (chunk c = 4g + k: k < 3 the low 6 bits of
// r(3g + k), k = 3 bits 6-7 of r(3g), r(3g + 1), r(3g + 2) as its bit pairs 0-1, 2-3, 4-5). Three
// zmm loads give [r0 | r1], [r2 | r3], [r4 | r5]: masked, chunks [0 | 1], [2 | 4], [5 | 6]; the
// gathered [3 | 7] is built from [r0 | r3], [r1 | r4], [r2 | r5]. A 128-bit lane of 16 quants is one
// scale's group (q6_k_x8_scale_pick).

// The token's Q8_K super-block in the order of the rows' four quant vectors, with -32 times each
// int32 lane's 4 quants (the quants' -32 starts every vpdpbusd lane, as in Q6_KRows).
struct Q6KX8Token {
    __m512i x[4];
    __m512i offset[4];
    explicit Q6KX8Token(const BlockQ8_K& b) {
        const __m512i first = _mm512_loadu_si512(b.qs);         // chunks 0, 1
        const __m512i second = _mm512_loadu_si512(b.qs + 64);   // chunks 2, 3
        const __m512i third = _mm512_loadu_si512(b.qs + 128);   // chunks 4, 5
        const __m512i fourth = _mm512_loadu_si512(b.qs + 192);  // chunks 6, 7
        x[0] = first;
        x[1] = _mm512_mask_blend_epi64(0xF0, second, _mm512_shuffle_i64x2(third, third, _MM_SHUFFLE(1, 0, 1, 0)));
        x[2] = _mm512_shuffle_i64x2(third, fourth, _MM_SHUFFLE(1, 0, 3, 2));   // chunks 5, 6
        x[3] = _mm512_shuffle_i64x2(second, fourth, _MM_SHUFFLE(3, 2, 3, 2));  // chunks 3, 7
        for (int k = 0; k < 4; ++k) {
            offset[k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), x[k]));
        }
    }
};

// vpermw index from the 16 int16 scales to the words of packs (vector 0, vector 1) and (vector 2,
// vector 3): per 128-bit lane L, words 0..3 the first vector's scale there, words 4..7 the second's.
// Scale of vector v, lane L: v0 [0 1 2 3], v1 [4 5 8 9], v2 [10 11 12 13], v3 [6 7 14 15].
inline __m512i q6_k_x8_scale_pick(int pack) {
    static constexpr int16_t kScale[4][4] = {{0, 1, 2, 3}, {4, 5, 8, 9}, {10, 11, 12, 13}, {6, 7, 14, 15}};
    alignas(64) int16_t index[32];
    for (int lane = 0; lane < 4; ++lane) {
        for (int w = 0; w < 8; ++w) index[8 * lane + w] = kScale[2 * pack + (w < 4 ? 0 : 1)][lane];
    }
    return _mm512_load_si512(index);
}

// One row's super-block: 16 int32 lanes summing to isum.
inline __m512i q6_k_x8_isum_lanes(const BlockQ6_KX8Row& b, const Q6KX8Token& t, const __m512i* pick) {
    const __m512i low6 = _mm512_set1_epi8(0x3F);
    const __m512i z0 = _mm512_loadu_si512(b.q), z1 = _mm512_loadu_si512(b.q + 64), z2 = _mm512_loadu_si512(b.q + 128);
    const __m512i r0_r3 = _mm512_mask_blend_epi64(0xF0, z0, z1);
    const __m512i r1_r4 = _mm512_shuffle_i64x2(z0, z2, _MM_SHUFFLE(1, 0, 3, 2));
    const __m512i r2_r5 = _mm512_mask_blend_epi64(0xF0, z1, z2);
    // bit select (c ? b : a) of bits 2-3, then 4-5; bits 6-7 masked off after
    const __m512i bits01_23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(r0_r3, 6), _mm512_srli_epi16(r1_r4, 4),
                                                        _mm512_set1_epi8(0x0C), 0xD8);
    const __m512i gathered = _mm512_and_si512(
        _mm512_ternarylogic_epi32(bits01_23, _mm512_srli_epi16(r2_r5, 2), _mm512_set1_epi8(0x30), 0xD8), low6);
    const __m512i quants[4] = {_mm512_and_si512(z0, low6), _mm512_and_si512(z1, low6), _mm512_and_si512(z2, low6),
                               gathered};
    const __m512i scales =
        _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))));
    __m512i acc = _mm512_setzero_si512();
    for (int p = 0; p < 2; ++p) {
        const __m512i sums = packed_quad_sums(quants[2 * p], t.x[2 * p], quants[2 * p + 1], t.x[2 * p + 1],
                                              t.offset[2 * p], t.offset[2 * p + 1]);
        acc = _mm512_dpwssd_epi32(acc, sums, _mm512_permutexvar_epi16(pick[p], scales));
    }
    return acc;
}

// y[0..8) for the 8 rows of the group at `group` (n_sb super-blocks of kQ6KX8GroupBytes); each
// super-block step prefetches `prefetch_step` bytes from `prefetch` on (decode_panel_in_passes).
template <bool kL1>
void q6_k_x8_group_decode_zmm(float* y, const uint8_t* group, const BlockQ8_K* xb, size_t n_sb, const uint8_t* prefetch,
                              size_t prefetch_step) {
    const __m512i pick[2] = {q6_k_x8_scale_pick(0), q6_k_x8_scale_pick(1)};
    __m256 acc = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, group += kQ6KX8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const Q6KX8Token tok(xb[sb]);
        __m512i lanes[kQ6KX8Rows];
        for (size_t r = 0; r < kQ6KX8Rows; ++r) {
            lanes[r] =
                q6_k_x8_isum_lanes(*reinterpret_cast<const BlockQ6_KX8Row*>(group + kQ6KX8RowBytes * r), tok, pick);
        }
        const __m256i isum = sum_lanes_of_8_zmm(lanes);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ6KX8DOffset)));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb[sb].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    _mm256_storeu_ps(y, acc);
}

// A panel of kPanelRows rows = two groups, the second at 8 * w_row_bytes.
template <bool kL1>
void q6_k_x8_panel_decode_zmm(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock*,
                              size_t n) {
    static_assert(kPanelRows == 2 * kQ6KX8Rows && kDecodeRows == kQ6KX8Rows, "a panel is two groups");
    const size_t n_sb = n / kQKK;
    decode_groups_in_passes<kL1>(
        y, static_cast<const uint8_t*>(w), w_row_bytes, n_sb,
        [&](float* y_pass, const uint8_t* group, const uint8_t* prefetch, size_t prefetch_step) {
            q6_k_x8_group_decode_zmm<kL1>(y_pass, group, static_cast<const BlockQ8_K*>(x), n_sb, prefetch,
                                          prefetch_step);
        });
}

// Replaces the AVX2 table's one-token decode of the repacked K layouts (its packers stay).
void register_k_x8_decode_zmm(CpuKernels& t, bool decode_prefetch_l1) {
    t.panel_decode[static_cast<size_t>(DType::Q6_K_X8)] =
        decode_prefetch_l1 ? q6_k_x8_panel_decode_zmm<true> : q6_k_x8_panel_decode_zmm<false>;
}
