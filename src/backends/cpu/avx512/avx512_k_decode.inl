// One-token decode of Q4_K and Q6_K at 512 bits for the AVX-512 VNNI table, straight from the GGUF
// rows: per row and super-block, the 256 quants are 2 (Q4_K: qs) or 3 (Q6_K: ql, qh) zmm loads,
// multiplied with the token's quants by 4 vpmaddubsw and with the row's scales by 4 vpdpwssd, where
// the AVX2 kernel (avx2_k_panels.inl) takes 8 vpmaddubsw and 8 vpmaddwd per row on 256-bit vectors.
// On Zen 5 that kernel was bound by its instruction count, not by memory (docs/PERFORMANCE.md,
// session 12). The int32 isum and mdot of a super-block are exact, so they equal the AVX2 kernel's
// whatever the order; the float work is the same instructions in the same order, so the result
// equals the table's vec_dot bit for bit (tests/ops/panel_decode_test.cpp). Included inside the
// anonymous namespace of avx512_kernels.cpp, after x86_quant_kernels.inl.

// One Q8_K super-block of the token, in the order of the rows' 512-bit quant vectors (shared by 8 rows).
struct KDecodeToken {
    __m512i x[4];
    __m128i pairs;  // Q4_K: int16 P_k = bsums_2k + bsums_2k+1 (the mins' dot)
    __m256i bsums;  // Q6_K: int16 bsums_0..15 (the -32 offset)
};

// Q4_K: qs bytes 32j .. 32j + 31 hold quants 64j .. 64j + 31 (low nibbles) and 64j + 32 .. 64j + 63
// (high nibbles), chunk c = quants 32c .. 32c + 31 with scale c. A zmm of qs bytes 64m .. 64m + 63
// holds chunks 4m, 4m + 2 (low nibbles) and 4m + 1, 4m + 3 (high nibbles), one per 256-bit half.
struct Q4_KDecode {
    using Block = BlockQ4_K;
    static constexpr bool kHasMins = true;

    // x[2m]: quants of chunks 4m | 4m + 2; x[2m + 1]: chunks 4m + 1 | 4m + 3
    static KDecodeToken token(const BlockQ8_K& b) {
        KDecodeToken t;
        for (int m = 0; m < 2; ++m) {
            const __m512i first = _mm512_loadu_si512(b.qs + 128 * m);        // chunks 4m, 4m + 1
            const __m512i second = _mm512_loadu_si512(b.qs + 128 * m + 64);  // chunks 4m + 2, 4m + 3
            t.x[2 * m] = _mm512_shuffle_i64x2(first, second, _MM_SHUFFLE(1, 0, 1, 0));
            t.x[2 * m + 1] = _mm512_shuffle_i64x2(first, second, _MM_SHUFFLE(3, 2, 3, 2));
        }
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.bsums));
        t.pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        return t;
    }

    // 16 int32 lanes summing to isum; *mdot: 4 lanes summing to mdot.
    static __m512i lanes(const Block& b, const KDecodeToken& t, __m128i* mdot) {
        const __m128i bytes = unpack_k_scales_sse(b.scales);  // scale_0..7, min_0..7
        *mdot = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8)), t.pairs);
        // every 128-bit lane: int16 scale_0..7; vpshufb picks scale c for a 256-bit half of chunk c
        const __m512i scales = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(bytes));
        const __m512i mask = _mm512_set1_epi8(0x0F);
        __m512i acc = _mm512_setzero_si512();
        for (int m = 0; m < 2; ++m) {
            const __m512i q = _mm512_loadu_si512(b.qs + 64 * m);
            const __m512i low = _mm512_and_si512(q, mask), high = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(low, t.x[2 * m]),
                                      _mm512_shuffle_epi8(scales, scale_pick(4 * m, 4 * m + 2)));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(high, t.x[2 * m + 1]),
                                      _mm512_shuffle_epi8(scales, scale_pick(4 * m + 1, 4 * m + 3)));
        }
        return acc;
    }

    // vpshufb control: word `a` in the low 256 bits, word `b` in the high 256 bits
    static __m512i scale_pick(int a, int b) {
        const __m256i lo = _mm256_set1_epi16(static_cast<short>((2 * a) | ((2 * a + 1) << 8)));
        const __m256i hi = _mm256_set1_epi16(static_cast<short>((2 * b) | ((2 * b + 1) << 8)));
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
};

// Q6_K: for half n, ql bytes 64n .. 64n + 63 hold quants 128n .. 128n + 63 (low nibbles) and
// 128n + 64 .. 128n + 127 (high nibbles); qh byte 32n + l holds their bits 4-5, in bit pairs 0-1,
// 2-3 (low nibbles of bytes l, l + 32) and 4-5, 6-7 (high nibbles). A zmm of 64 quants then covers
// sub-blocks 4k .. 4k + 3 of 16, one per 128-bit lane.
struct Q6_KDecode {
    using Block = BlockQ6_K;
    static constexpr bool kHasMins = false;

    static KDecodeToken token(const BlockQ8_K& b) {
        KDecodeToken t;
        for (int k = 0; k < 4; ++k) t.x[k] = _mm512_loadu_si512(b.qs + 64 * k);
        t.bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.bsums));
        t.pairs = _mm_setzero_si128();
        return t;
    }

    static __m512i lanes(const Block& b, const KDecodeToken& t, __m128i* mdot) {
        *mdot = _mm_setzero_si128();
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
        const __m512i scales = _mm512_zextsi256_si512(scales16);
        const __m512i qh_all = _mm512_loadu_si512(b.qh);  // qh of half 0 | half 1
        const __m512i mask = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
        // per 16-bit lane: shift the bit pair of the low 256 bits (0-1 / 4-5) and of the high 256 bits
        // (2-3 / 6-7) to bits 4-5
        const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
        const __m512i down = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        const __m512i qh_of_half[2] = {_mm512_shuffle_i64x2(qh_all, qh_all, _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i64x2(qh_all, qh_all, _MM_SHUFFLE(3, 2, 3, 2))};
        __m512i acc = _mm512_setzero_si512();
        for (int n = 0; n < 2; ++n) {
            const __m512i ql = _mm512_loadu_si512(b.ql + 64 * n);
            const __m512i qh = qh_of_half[n];
            const __m512i low =
                _mm512_or_si512(_mm512_and_si512(ql, mask), _mm512_and_si512(_mm512_sllv_epi16(qh, up), bits45));
            const __m512i high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), mask),
                                                 _mm512_and_si512(_mm512_srlv_epi16(qh, down), bits45));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(low, t.x[2 * n]),
                                      _mm512_permutexvar_epi16(sub_block_pick(8 * n), scales));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(high, t.x[2 * n + 1]),
                                      _mm512_permutexvar_epi16(sub_block_pick(8 * n + 4), scales));
        }
        // minus 32 * sum_i scale_i * bsums_i, as in k_row_lanes (8 lanes in the low half)
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, t.bsums), 5);
        return _mm512_sub_epi32(acc, _mm512_zextsi256_si512(offset));
    }

    // vpermw index: word s in 128-bit lane 0, s + 1 in lane 1, s + 2, s + 3
    static __m512i sub_block_pick(int s) {
        return _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s + 1)), _mm_set1_epi16(static_cast<short>(s)))),
            _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s + 3)), _mm_set1_epi16(static_cast<short>(s + 2))), 1);
    }
};

// 16 int32 lanes -> 4 lanes with the same sum.
inline __m128i fold_to_4(__m512i v) {
    const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

// y[0..8) = vec_dot(row r, x) for 8 rows, prefetching the next panel as the AVX2 k_half_panel_decode.
template <class D, bool kL1>
void k_half_panel_decode_zmm(float* y, const uint8_t* rows, size_t w_row_bytes, const BlockQ8_K* xb, size_t n_sb,
                             const uint8_t* prefetch, size_t prefetch_step) {
    using Block = typename D::Block;
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const KDecodeToken tok = D::token(xb[sb]);
        const size_t block_byte = sb * sizeof(Block);
        __m256i lanes[kDecodeRows];  // row r: [4 lanes of isum | 4 lanes of mdot]
        for (size_t r = 0; r < kDecodeRows; ++r) {
            __m128i mdot;
            const __m128i isum =
                fold_to_4(D::lanes(*reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte), tok, &mdot));
            lanes[r] = _mm256_set_m128i(mdot, isum);
        }
        __m256i isum, mdot;
        sum_halves_of_8(lanes, &isum, &mdot);
        k_decode_scale_step<Block, D::kHasMins>(rows, w_row_bytes, block_byte, _mm256_set1_ps(xb[sb].d), isum, mdot,
                                                &acc, &acc_min);
    }
    _mm256_storeu_ps(y, D::kHasMins ? _mm256_sub_ps(acc, acc_min) : acc);
}

template <class D, bool kL1>
void k_panel_decode_zmm(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock*, size_t n) {
    const size_t n_sb = n / kQKK;
    decode_panel_in_passes(y, static_cast<const uint8_t*>(w), w_row_bytes, n_sb,
                           [&](float* y_pass, const uint8_t* rows, const uint8_t* prefetch, size_t prefetch_step) {
                               k_half_panel_decode_zmm<D, kL1>(y_pass, rows, w_row_bytes,
                                                               static_cast<const BlockQ8_K*>(x), n_sb, prefetch,
                                                               prefetch_step);
                           });
}

// Replaces the one-token decode of Q4_K and Q6_K inherited from the AVX2 table (Q5_K keeps it).
void register_k_decode_zmm(CpuKernels& t, bool decode_prefetch_l1) {
    t.panel_decode[static_cast<size_t>(DType::Q4_K)] =
        decode_prefetch_l1 ? k_panel_decode_zmm<Q4_KDecode, true> : k_panel_decode_zmm<Q4_KDecode, false>;
    t.panel_decode[static_cast<size_t>(DType::Q6_K)] =
        decode_prefetch_l1 ? k_panel_decode_zmm<Q6_KDecode, true> : k_panel_decode_zmm<Q6_KDecode, false>;
}
