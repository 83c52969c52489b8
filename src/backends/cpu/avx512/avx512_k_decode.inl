// One-token decode of Q4_K and Q6_K at 512 bits for the AVX-512 VNNI table, straight from the GGUF
// rows, 8 rows per pass. Per row and super-block the 256 quants are 2 (Q4_K: qs) or 3 (Q6_K: ql,
// qh) zmm loads. vpdpbusd sums 4 quant products per int32 lane (at most 4 * 63 * 128 = 32,256, so
// exact as int16), vpackssdw packs two such vectors into words, 4 words per 16 quants, and one
// vpdpwssd multiplies them with their scales: per 64 bytes of quants 3 multiplies and 2 shuffles,
// where a vpmaddubsw + vpdpwssd per vector takes 4 and 2 (Q4_K from L2 on Zen 5: 172-189 GFLOP/s
// against 130-135, tests/tools/matmul_bench). Q4_K's 6-bit scales are unpacked for 4 rows at once (one
// row per 128-bit lane), and the 8 rows' 16-lane sums are transposed together. The int32 isum and
// mdot of a super-block are exact, so they equal the AVX2 kernel's whatever the order; the float
// step is k_decode_scale_step, so the result equals the table's vec_dot bit for bit
// (tests/ops/panel_decode_test.cpp). Included inside the anonymous namespace of avx512_kernels.cpp,
// after x86_quant_kernels.inl.

// One Q8_K super-block of the token, in the order of the rows' 512-bit quant vectors (shared by 8 rows).
struct KDecodeToken {
    __m512i x[4];
    __m128i pairs;      // Q4_K only: int16 P_k = bsums_2k + bsums_2k+1 (the mins' dot)
    __m512i offset[4];  // Q6_K only: -32 times the sum of x[k]'s 4 quants per int32 lane (the -32 of the quants)
};

// Per 128-bit lane: words 0..3 the sums of 4 products of a's int32 lanes there (plus start_a's
// lanes), words 4..7 b's.
inline __m512i packed_quad_sums(__m512i quants_a, __m512i x_a, __m512i quants_b, __m512i x_b,
                                __m512i start_a = _mm512_setzero_si512(), __m512i start_b = _mm512_setzero_si512()) {
    return _mm512_packs_epi32(_mm512_dpbusd_epi32(start_a, quants_a, x_a), _mm512_dpbusd_epi32(start_b, quants_b, x_b));
}

// v[r]: 16 int32 lanes of row r  ->  lane r = the sum of v[r]'s lanes.
inline __m256i sum_lanes_of_8_zmm(const __m512i* v) {
    __m512i pairs[4];  // per 128-bit lane: partial sums of rows 2k, 2k + 1, 2k, 2k + 1
    for (int k = 0; k < 4; ++k) {
        pairs[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                                    _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
    }
    // per 128-bit lane: partial sums of rows 0..3 (quads[0]) and 4..7 (quads[1])
    const __m512i quads[2] = {
        _mm512_add_epi32(_mm512_unpacklo_epi64(pairs[0], pairs[1]), _mm512_unpackhi_epi64(pairs[0], pairs[1])),
        _mm512_add_epi32(_mm512_unpacklo_epi64(pairs[2], pairs[3]), _mm512_unpackhi_epi64(pairs[2], pairs[3]))};
    // 128-bit lanes [rows 0..3: lanes 0 + 2, 1 + 3 | rows 4..7: lanes 0 + 2, 1 + 3]
    const __m512i halves = _mm512_add_epi32(_mm512_shuffle_i64x2(quads[0], quads[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                            _mm512_shuffle_i64x2(quads[0], quads[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i sums = _mm512_add_epi32(_mm512_shuffle_i64x2(halves, halves, _MM_SHUFFLE(3, 1, 2, 0)),
                                          _mm512_shuffle_i64x2(halves, halves, _MM_SHUFFLE(2, 0, 3, 1)));
    return _mm512_castsi512_si256(sums);
}

// m[0]: rows 0..3, m[1]: rows 4..7, one row's 4 int32 lanes per 128-bit lane  ->  lane r = row r's sum.
inline __m256i sum_quads_of_8(const __m512i* m) {
    __m512i total[2];  // every lane of a 128-bit lane: its row's sum
    for (int h = 0; h < 2; ++h) {
        const __m512i pairs = _mm512_add_epi32(m[h], _mm512_shuffle_epi32(m[h], _MM_PERM_BADC));
        total[h] = _mm512_add_epi32(pairs, _mm512_shuffle_epi32(pairs, _MM_PERM_CDAB));
    }
    const __m512i first_lanes = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutex2var_epi32(total[0], first_lanes, total[1]));
}

// ---- Q4_K -----------------------------------------------------------------------------------------
// qs bytes 32j .. 32j + 31 hold quants 64j .. 64j + 31 (low nibbles) and 64j + 32 .. 64j + 63 (high
// nibbles), chunk c = quants 32c .. 32c + 31 with scale c. A zmm of qs bytes 64m .. 64m + 63 holds
// chunks 4m, 4m + 2 (low nibbles) and 4m + 1, 4m + 3 (high nibbles), one per 256-bit half; packed,
// 128-bit lanes 0, 1 hold chunk 4m's sums (words 0..3) and 4m + 1's (words 4..7), lanes 2, 3 chunks
// 4m + 2 and 4m + 3.

// unpack_k_scale_words on 4 super-blocks' 16 bytes, one per 128-bit lane.
inline __m512i unpack_k_scale_words_zmm(__m512i words) {
    const __m512i low_parts = _mm512_shuffle_epi8(
        words, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
    const __m512i high_sources = _mm512_shuffle_epi8(
        words, _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7)));
    const __m512i low_mask = _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m512i low =
        _mm512_and_si512(_mm512_srlv_epi32(low_parts, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 4))), low_mask);
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(high_sources, 2), _mm512_set1_epi8(0x30));
    return _mm512_or_si512(low, high);
}

// 128-bit lane i = scale_0..7, min_0..7 (bytes) of row i's super-block at block_byte.
inline __m512i q4_k_scale_bytes_of_4_rows(const uint8_t* rows, size_t w_row_bytes, size_t block_byte) {
    const auto packed = [&](size_t r) {  // 16 bytes: the 12 scale bytes and 4 of the quants
        return _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(rows + r * w_row_bytes + block_byte + offsetof(BlockQ4_K, scales)));
    };
    const __m256i low = _mm256_set_m128i(packed(1), packed(0)), high = _mm256_set_m128i(packed(3), packed(2));
    return unpack_k_scale_words_zmm(_mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1));
}

// vpshufb control, from a row's scale bytes in every 128-bit lane to the words of zmm m's chunk
// scales as its packed sums lie: lanes 0, 1 scale 4m (words 0..3) and 4m + 1 (4..7), lanes 2, 3
// scales 4m + 2 and 4m + 3 (each word's high byte zero).
inline __m512i q4_k_scale_words_pick(int m) {
    const auto lane = [](int first) {
        const char a = static_cast<char>(first), b = static_cast<char>(first + 1), z = -1;
        return _mm256_broadcastsi128_si256(_mm_setr_epi8(a, z, a, z, a, z, a, z, b, z, b, z, b, z, b, z));
    };
    return _mm512_inserti64x4(_mm512_castsi256_si512(lane(4 * m)), lane(4 * m + 2), 1);
}

struct Q4_KRows {
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

    // One row: 16 int32 lanes summing to isum. scales: the row's scale bytes in every 128-bit lane.
    static __m512i isum_lanes(const Block& b, const KDecodeToken& t, __m512i scales, const __m512i* pick) {
        const __m512i mask = _mm512_set1_epi8(0x0F);
        __m512i acc = _mm512_setzero_si512();
        for (int m = 0; m < 2; ++m) {
            const __m512i q = _mm512_loadu_si512(b.qs + 64 * m);
            const __m512i sums = packed_quad_sums(_mm512_and_si512(q, mask), t.x[2 * m],
                                                  _mm512_and_si512(_mm512_srli_epi16(q, 4), mask), t.x[2 * m + 1]);
            acc = _mm512_dpwssd_epi32(acc, sums, _mm512_shuffle_epi8(scales, pick[m]));
        }
        return acc;
    }

    // The exact isum and mdot of 8 rows' super-block at block_byte, lane r = row r.
    static void sums(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const KDecodeToken& t, __m256i* isum,
                     __m256i* mdot) {
        const __m512i pick[2] = {q4_k_scale_words_pick(0), q4_k_scale_words_pick(1)};
        const __m512i pairs = _mm512_broadcast_i32x4(t.pairs);
        __m512i isums[kDecodeRows], mdots[2];
        for (size_t h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
            const uint8_t* quad = rows + 4 * h * w_row_bytes;
            const __m512i bytes = q4_k_scale_bytes_of_4_rows(quad, w_row_bytes, block_byte);
            mdots[h] = _mm512_madd_epi16(_mm512_unpackhi_epi8(bytes, _mm512_setzero_si512()), pairs);
            // each row's scales to all 4 lanes by a broadcast load, which takes no shuffle slot
            alignas(64) uint8_t scale_bytes[64];
            _mm512_store_si512(scale_bytes, bytes);
            for (size_t i = 0; i < 4; ++i) {
                const __m512i row_scales =
                    _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(scale_bytes + 16 * i)));
                isums[4 * h + i] = isum_lanes(*reinterpret_cast<const Block*>(quad + i * w_row_bytes + block_byte), t,
                                              row_scales, pick);
            }
        }
        *isum = sum_lanes_of_8_zmm(isums);
        *mdot = sum_quads_of_8(mdots);
    }
};

// ---- Q6_K -----------------------------------------------------------------------------------------
// For half n, ql bytes 64n .. 64n + 63 hold quants 128n .. 128n + 63 (low nibbles) and
// 128n + 64 .. 128n + 127 (high nibbles); qh byte 32n + l holds their bits 4-5, in bit pairs 0-1,
// 2-3 (low nibbles of bytes l, l + 32) and 4-5, 6-7 (high nibbles). A zmm of 64 quants then covers
// sub-blocks 4k .. 4k + 3 of 16, one per 128-bit lane; packed, lane L of half n holds sub-blocks
// 8n + L (words 0..3) and 8n + 4 + L (words 4..7).

// vpermw index from the 16 int16 scales to half n's words as its packed sums lie.
inline __m512i q6_k_scale_words_pick(int n) {
    alignas(64) int16_t index[32];
    for (int lane = 0; lane < 4; ++lane) {
        for (int w = 0; w < 8; ++w) index[8 * lane + w] = static_cast<int16_t>(8 * n + lane + (w < 4 ? 0 : 4));
    }
    return _mm512_load_si512(index);
}

struct Q6_KRows {
    using Block = BlockQ6_K;
    static constexpr bool kHasMins = false;

    static KDecodeToken token(const BlockQ8_K& b) {
        KDecodeToken t;
        for (int k = 0; k < 4; ++k) {
            t.x[k] = _mm512_loadu_si512(b.qs + 64 * k);
            t.offset[k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), t.x[k]));
        }
        return t;
    }

    // One row: 16 int32 lanes summing to isum. The quants' -32 starts each vpdpbusd lane (t.offset):
    // the sums of 4 products (q - 32) x stay within 4 * 32 * 128 = 16,384.
    static __m512i isum_lanes(const Block& b, const KDecodeToken& t, const __m512i* pick) {
        const __m512i scales =
            _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))));
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
            const __m512i sums =
                packed_quad_sums(low, t.x[2 * n], high, t.x[2 * n + 1], t.offset[2 * n], t.offset[2 * n + 1]);
            acc = _mm512_dpwssd_epi32(acc, sums, _mm512_permutexvar_epi16(pick[n], scales));
        }
        return acc;
    }

    static void sums(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const KDecodeToken& t, __m256i* isum,
                     __m256i*) {
        const __m512i pick[2] = {q6_k_scale_words_pick(0), q6_k_scale_words_pick(1)};
        __m512i isums[kDecodeRows];
        for (size_t r = 0; r < kDecodeRows; ++r) {
            isums[r] = isum_lanes(*reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte), t, pick);
        }
        *isum = sum_lanes_of_8_zmm(isums);
    }
};

// ---- the passes -----------------------------------------------------------------------------------

// y[0..8) = vec_dot(row r, x) for 8 rows, prefetching the next panel as the AVX2 k_half_panel_decode.
template <class D, bool kL1>
void k_half_panel_decode_zmm(float* y, const uint8_t* rows, size_t w_row_bytes, const BlockQ8_K* xb, size_t n_sb,
                             const uint8_t* prefetch, size_t prefetch_step) {
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const size_t block_byte = sb * sizeof(typename D::Block);
        __m256i isum, mdot = _mm256_setzero_si256();
        D::sums(rows, w_row_bytes, block_byte, D::token(xb[sb]), &isum, &mdot);
        k_decode_scale_step<typename D::Block, D::kHasMins>(rows, w_row_bytes, block_byte, _mm256_set1_ps(xb[sb].d),
                                                            isum, mdot, &acc, &acc_min);
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
        decode_prefetch_l1 ? k_panel_decode_zmm<Q4_KRows, true> : k_panel_decode_zmm<Q4_KRows, false>;
    t.panel_decode[static_cast<size_t>(DType::Q6_K)] =
        decode_prefetch_l1 ? k_panel_decode_zmm<Q6_KRows, true> : k_panel_decode_zmm<Q6_KRows, false>;
}
