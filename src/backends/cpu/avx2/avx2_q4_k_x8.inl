// Q4_K_X8 (ops/q4_k_x8.h) in the x86 tables: the one-token product straight from the repacked
// groups, and the panels of prefill (Q4_K's panels, packed from the groups). Included inside the
// anonymous namespace of avx2_kernels.cpp after avx2_k_panels.inl. Results equal Q4_K's decode,
// panels and vec_dot bit for bit: the same exact int32 sums per super-block, the same float order.

// y[0..8) for the 8 rows of the group at `group` (n_sb super-blocks of kQ4KX8GroupBytes); each
// super-block step prefetches `prefetch_step` bytes from `prefetch` on (see half_panel_decode).
template <bool kL1>
void q4_k_x8_group_decode(float* y, const uint8_t* group, const BlockQ8_K* xb, size_t n_sb, const uint8_t* prefetch,
                          size_t prefetch_step) {
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, group += kQ4KX8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const KToken tok(xb + sb);
        __m256i is[4], md[4];
        for (size_t p = 0; p < 4; ++p) {
            const __m256i scale_bytes = load32(group + kQ4KX8ScaleOffset + 32 * p);  // [row p | row p + 4]
            md[p] = _mm256_madd_epi16(_mm256_unpackhi_epi8(scale_bytes, _mm256_setzero_si256()), tok.pairs_twice);
            const uint8_t* quants = group + 256 * p;
            const auto part = [quants](int j, int half) { return load32(quants + 32 * (2 * j + half)); };
            is[p] = q4_k_pair_isum(part, KScalePairs(scale_bytes), tok.read_from_l1());
        }
        // pair p: [row p | row p + 4], 4 lanes each -> [rows 0..3 | rows 4..7]
        const __m256i isum = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
        const __m256i mdot = _mm256_hadd_epi32(_mm256_hadd_epi32(md[0], md[1]), _mm256_hadd_epi32(md[2], md[3]));
        const __m256 dx = _mm256_set1_ps(xb[sb].d);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ4KX8DOffset)));
        const __m256 dmin =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ4KX8DminOffset)));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc);
        acc_min = _mm256_fmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mdot), acc_min);
    }
    _mm256_storeu_ps(y, _mm256_sub_ps(acc, acc_min));
}

// A panel of kPanelRows rows = two groups, the second at 8 * w_row_bytes.
template <bool kL1>
void q4_k_x8_panel_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock*, size_t n) {
    static_assert(kPanelRows == 2 * kQ4KX8Rows && kDecodeRows == kQ4KX8Rows, "a panel is two groups");
    const size_t n_sb = n / kQKK;
    decode_groups_in_passes<kL1>(
        y, static_cast<const uint8_t*>(w), w_row_bytes, n_sb,
        [&](float* y_pass, const uint8_t* group, const uint8_t* prefetch, size_t prefetch_step) {
            q4_k_x8_group_decode<kL1>(y_pass, group, static_cast<const BlockQ8_K*>(x), n_sb, prefetch, prefetch_step);
        });
}

// Several tokens: q4_k_pair_isum's int32 lanes of one pair for T tokens, is[t] for token t (quants
// qs[t] of its super-block). Each 32-byte part is split into its two nibble vectors once for all T
// tokens. The int16 pair sums and int32 lanes are the same integers (integer adds in another order),
// so the float work and the results are q4_k_x8_group_decode's, bit for bit.
template <int T>
inline void q4_k_pair_isum_tokens(const uint8_t* quants, const KScalePairs& scales, const int8_t* const* qs,
                                  __m256i* is) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (int t = 0; t < T; ++t) is[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {  // parts (j, 0) and (j, 1): chunk 2j (low nibbles) and 2j + 1 (high)
        const __m256i part0 = load32(quants + 32 * (2 * j)), part1 = load32(quants + 32 * (2 * j + 1));
        const __m256i low0 = _mm256_and_si256(part0, mask), high0 = _mm256_and_si256(_mm256_srli_epi16(part0, 4), mask);
        const __m256i low1 = _mm256_and_si256(part1, mask), high1 = _mm256_and_si256(_mm256_srli_epi16(part1, 4), mask);
        const __m256i scale_low = scales.chunk(2 * j), scale_high = scales.chunk(2 * j + 1);
        for (int t = 0; t < T; ++t) {
            const int8_t* x = qs[t] + 64 * j;
            const auto half = [x](int at) {
                return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + at)));
            };
            const __m256i low_pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(low0, half(0)), _mm256_maddubs_epi16(low1, half(16)));
            const __m256i high_pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(high0, half(32)), _mm256_maddubs_epi16(high1, half(48)));
            is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(low_pairs, scale_low));
            is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(high_pairs, scale_high));
        }
    }
}

// y[t * y_stride + r] for tokens t < T of `x` (rows of x_row_bytes) and the 8 rows of the group at
// `group`: q4_k_x8_group_decode's integers and float order per token.
template <bool kL1, int T>
void q4_k_x8_group_decode_tokens(float* y, size_t y_stride, const uint8_t* group, const uint8_t* x, size_t x_row_bytes,
                                 size_t n_sb, const uint8_t* prefetch, size_t prefetch_step) {
    __m256 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, group += kQ4KX8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const BlockQ8_K* xb[T];
        __m256i pairs_twice[T];
        for (int t = 0; t < T; ++t) {
            xb[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + sb;
            pairs_twice[t] = KToken(xb[t]).pairs_twice;
        }
        __m256i is[4][T], md[4][T];
        for (size_t p = 0; p < 4; ++p) {
            const __m256i scale_bytes = load32(group + kQ4KX8ScaleOffset + 32 * p);  // [row p | row p + 4]
            const __m256i mins = _mm256_unpackhi_epi8(scale_bytes, _mm256_setzero_si256());
            const int8_t* qs[T];
            for (int t = 0; t < T; ++t) {
                md[p][t] = _mm256_madd_epi16(mins, pairs_twice[t]);
                qs[t] = opaque(xb[t]->qs);
            }
            q4_k_pair_isum_tokens<T>(group + 256 * p, KScalePairs(scale_bytes), qs, is[p]);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ4KX8DOffset)));
        const __m256 dmin =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ4KX8DminOffset)));
        for (int t = 0; t < T; ++t) {  // pair p: [row p | row p + 4] -> [rows 0..3 | rows 4..7]
            const __m256i isum =
                _mm256_hadd_epi32(_mm256_hadd_epi32(is[0][t], is[1][t]), _mm256_hadd_epi32(is[2][t], is[3][t]));
            const __m256i mdot =
                _mm256_hadd_epi32(_mm256_hadd_epi32(md[0][t], md[1][t]), _mm256_hadd_epi32(md[2][t], md[3][t]));
            const __m256 dx = _mm256_set1_ps(xb[t]->d);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc[t]);
            acc_min[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mdot), acc_min[t]);
        }
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, _mm256_sub_ps(acc[t], acc_min[t]));
}

// A panel (two groups) for n_tokens tokens, in passes of up to kDecodeTokensPerPass; only the first
// pass prefetches the next panel.
template <bool kL1>
void q4_k_x8_panel_decode_tokens(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                                 size_t x_row_bytes, size_t n_tokens, size_t n) {
    const size_t n_sb = n / kQKK;
    decode_panel_tokens_in_passes(
        y, y_stride, w, w_row_bytes, x, x_row_bytes, n_tokens, n_sb,
        [](auto&&... args) { decode_groups_in_passes<kL1>(args...); },
        [&](float* y_pass, const uint8_t* group, const uint8_t* x_pass, const uint8_t* prefetch, size_t prefetch_step,
            auto tokens) {
            q4_k_x8_group_decode_tokens<kL1, decltype(tokens)::value>(y_pass, y_stride, group, x_pass, x_row_bytes,
                                                                      n_sb, prefetch, prefetch_step);
        });
}

// Prefill: Q4_K's panels, packed from the groups in place. Rebuilding GGUF blocks first (6-bit
// scales packed again, then unpacked by the packer) makes the 128-token product 21% slower than
// packing from the file's rows on the AVX-512 table (`matmul_bench Q4_K/R 1536 8960 128 1`).
struct Q4_KX8Rows {
    const uint8_t* groups;
    size_t group_stride;                               // 8 * w_row_bytes: the panel's second group
    const uint8_t* group(size_t r, size_t sb) const {  // the super-block of the group holding row r
        return groups + (r / kQ4KX8Rows) * group_stride + sb * kQ4KX8GroupBytes;
    }
    __m256i raw(size_t r, size_t sb, int i) const {  // qs[32 i, 32 i + 32)
        const uint8_t* g = group(r, sb);
        return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(g + q4_k_x8_part_offset(r % kQ4KX8Rows, i, 1)),
                                   reinterpret_cast<const __m128i*>(g + q4_k_x8_part_offset(r % kQ4KX8Rows, i, 0)));
    }
    void pack_scales(size_t r, size_t sb, uint32_t* words, uint32_t* mins) const {
        const uint8_t* s = group(r, sb) + q4_k_x8_scale_offset(r % kQ4KX8Rows);  // scales, then mins
        for (int c = 0; c < 8; ++c) words[c] = static_cast<uint32_t>(two_i16(s[c], s[c]));
        for (int k = 0; k < 4; ++k) mins[k] = static_cast<uint32_t>(two_i16(s[8 + 2 * k], s[9 + 2 * k]));
    }
    float half_at(size_t r, size_t sb, size_t offset) const {
        uint16_t h;
        std::memcpy(&h, group(r, sb) + offset + 2 * (r % kQ4KX8Rows), 2);
        return h2f(h);
    }
    float d(size_t r, size_t sb) const { return half_at(r, sb, kQ4KX8DOffset); }
    float dmin(size_t r, size_t sb) const { return half_at(r, sb, kQ4KX8DminOffset); }
};

void pack_q4_k_x8_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    pack_k_panel_rows<Q4_KPanels>(panel, Q4_KX8Rows{static_cast<const uint8_t*>(w), kQ4KX8Rows * w_row_bytes}, n);
}

// No vec_dot: the rows are interleaved (matmul takes whole panels of a Q4_K_X8 matrix).
void register_q4_k_x8(CpuKernels& t, bool decode_prefetch_l1) {
    const size_t q4_k = static_cast<size_t>(DType::Q4_K), x8 = static_cast<size_t>(DType::Q4_K_X8);
    t.repack[q4_k] = repack_q4_k_x8;
    t.repack_type[q4_k] = DType::Q4_K_X8;
    t.pack_panel[x8] = pack_q4_k_x8_panel;
    t.panel_act[x8] = k_panel_act<Q4_KPanels>;
    t.panel_gemm[x8] = k_panel8_gemm<Q4_KPanels>;
    t.panel_decode[x8] = decode_prefetch_l1 ? q4_k_x8_panel_decode<true> : q4_k_x8_panel_decode<false>;
    t.panel_decode_tokens[x8] =
        decode_prefetch_l1 ? q4_k_x8_panel_decode_tokens<true> : q4_k_x8_panel_decode_tokens<false>;
}
