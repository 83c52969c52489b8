// Q6_K_X8 (ops/q6_k_x8.h) in the x86 tables: the one-token product straight from the repacked
// groups (the AVX-512 table has its own), and the panels of prefill (Q6_K's panels, packed from the
// repacked rows). Included inside the anonymous namespace of avx2_kernels.cpp after
// avx2_k_panels.inl. Results equal Q6_K's decode, panels and vec_dot bit for bit: the same quants,
// so the same exact int32 sums, the same float order.

// A row's super-block of Q6_K_X8 as a K format of avx2_k_panels.inl: Q6_K's scales, facts and
// packed scales, its own quants.
struct Q6_KX8Panels : Q6_KPanels {
    using Block = BlockQ6_KX8Row;
    static Scales scales(const Block& b) { return Scales(b.scales); }
    static constexpr int kRaw = 6;  // q[0..192)
    static __m256i raw(const Block& b, int i) { return load32(b.q + 32 * i); }
    // chunk c = 4 g + k: k < 3 the low 6 bits of raw 3 g + k; k = 3 bits 6, 7 of raw 3 g, 3 g + 1,
    // 3 g + 2 as its bits (0, 1), (2, 3), (4, 5) (the 16-bit shifts' spill-over is masked off)
    static __m256i chunk_of(const __m256i* raw, int c) {
        const int g = c / 4, k = c % 4;
        if (k < 3) return _mm256_and_si256(raw[3 * g + k], _mm256_set1_epi8(0x3F));
        const __m256i b01 = _mm256_and_si256(_mm256_srli_epi16(raw[3 * g], 6), _mm256_set1_epi8(0x03));
        const __m256i b23 = _mm256_and_si256(_mm256_srli_epi16(raw[3 * g + 1], 4), _mm256_set1_epi8(0x0C));
        const __m256i b45 = _mm256_and_si256(_mm256_srli_epi16(raw[3 * g + 2], 2), _mm256_set1_epi8(0x30));
        return _mm256_or_si256(_mm256_or_si256(b01, b23), b45);
    }
};

// y[0..8) for the 8 rows of the group at `group` (n_sb super-blocks of kQ6KX8GroupBytes); each
// super-block step prefetches `prefetch_step` bytes from `prefetch` on (see half_panel_decode).
template <bool kL1>
void q6_k_x8_group_decode(float* y, const uint8_t* group, const BlockQ8_K* xb, size_t n_sb, const uint8_t* prefetch,
                          size_t prefetch_step) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, group += kQ6KX8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const KToken tok(xb + sb);
        __m256i lanes[kQ6KX8Rows];
        for (size_t r = 0; r < kQ6KX8Rows; ++r) {  // k_row_lanes reads no d: the group holds it apart
            lanes[r] = k_row_lanes<Q6_KX8Panels>(*reinterpret_cast<const BlockQ6_KX8Row*>(group + kQ6KX8RowBytes * r),
                                                 tok.read_from_l1());
        }
        const __m256i isum = sum_lanes_of_8(lanes);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ6KX8DOffset)));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb[sb].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    _mm256_storeu_ps(y, acc);
}

// A panel of kPanelRows rows = two groups, the second at 8 * w_row_bytes.
template <bool kL1>
void q6_k_x8_panel_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock*, size_t n) {
    static_assert(kPanelRows == 2 * kQ6KX8Rows && kDecodeRows == kQ6KX8Rows, "a panel is two groups");
    const size_t n_sb = n / kQKK;
    decode_groups_in_passes<kL1>(
        y, static_cast<const uint8_t*>(w), w_row_bytes, n_sb,
        [&](float* y_pass, const uint8_t* group, const uint8_t* prefetch, size_t prefetch_step) {
            q6_k_x8_group_decode<kL1>(y_pass, group, static_cast<const BlockQ8_K*>(x), n_sb, prefetch, prefetch_step);
        });
}

// y[t * y_stride + r] for tokens t < T of `x` (rows of x_row_bytes) and the 8 rows of the group at
// `group`: q6_k_x8_group_decode's integers and float order per token, each row's chunks unpacked
// once for the T tokens.
template <bool kL1, int T>
void q6_k_x8_group_decode_tokens(float* y, size_t y_stride, const uint8_t* group, const uint8_t* x, size_t x_row_bytes,
                                 size_t n_sb, const uint8_t* prefetch, size_t prefetch_step) {
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, group += kQ6KX8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        KToken tok[T];
        for (int t = 0; t < T; ++t) tok[t] = KToken(reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + sb);
        __m256i lanes[T][kQ6KX8Rows];
        for (size_t r = 0; r < kQ6KX8Rows; ++r) {
            const int8_t* qs[T];
            for (int t = 0; t < T; ++t) qs[t] = opaque(tok[t].b->qs);
            __m256i row[T];
            k_row_lanes_tokens<Q6_KX8Panels, T>(*reinterpret_cast<const BlockQ6_KX8Row*>(group + kQ6KX8RowBytes * r),
                                                qs, tok, row);
            for (int t = 0; t < T; ++t) lanes[t][r] = row[t];
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ6KX8DOffset)));
        for (int t = 0; t < T; ++t) {
            const __m256i isum = sum_lanes_of_8(lanes[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].b->d)), _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// A panel (two groups) for n_tokens tokens, in passes of up to kDecodeTokensPerPass; only the first
// pass prefetches the next panel.
template <bool kL1>
void q6_k_x8_panel_decode_tokens(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                                 size_t x_row_bytes, size_t n_tokens, size_t n) {
    const size_t n_sb = n / kQKK;
    decode_panel_tokens_in_passes(
        y, y_stride, w, w_row_bytes, x, x_row_bytes, n_tokens, n_sb,
        [](auto&&... args) { decode_groups_in_passes<kL1>(args...); },
        [&](float* y_pass, const uint8_t* group, const uint8_t* x_pass, const uint8_t* prefetch, size_t prefetch_step,
            auto tokens) {
            q6_k_x8_group_decode_tokens<kL1, decltype(tokens)::value>(y_pass, y_stride, group, x_pass, x_row_bytes,
                                                                      n_sb, prefetch, prefetch_step);
        });
}

// Prefill: Q6_K's panels, packed from the groups in place (row r's super-block sb lies as a
// BlockQ6_KX8Row without its d; the packer reads d apart).
struct Q6_KX8Rows : KBlockRows<Q6_KX8Panels, Q6_KX8Rows> {
    const uint8_t* groups;
    size_t group_stride;  // 8 * w_row_bytes: the panel's second group
    Q6_KX8Rows(const uint8_t* groups_in, size_t group_stride_in) : groups(groups_in), group_stride(group_stride_in) {}
    const uint8_t* group(size_t r, size_t sb) const {
        return groups + (r / kQ6KX8Rows) * group_stride + sb * kQ6KX8GroupBytes;
    }
    const BlockQ6_KX8Row& block(size_t r, size_t sb) const {
        return *reinterpret_cast<const BlockQ6_KX8Row*>(group(r, sb) + kQ6KX8RowBytes * (r % kQ6KX8Rows));
    }
    float d(size_t r, size_t sb) const {
        uint16_t h;
        std::memcpy(&h, group(r, sb) + kQ6KX8DOffset + 2 * (r % kQ6KX8Rows), 2);
        return h2f(h);
    }
};

void pack_q6_k_x8_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    pack_k_panel_rows<Q6_KX8Panels>(panel, Q6_KX8Rows(static_cast<const uint8_t*>(w), kQ6KX8Rows * w_row_bytes), n);
}

// No vec_dot: the rows are interleaved (matmul takes whole panels of a Q6_K_X8 matrix).
void register_q6_k_x8(CpuKernels& t, bool decode_prefetch_l1) {
    const size_t q6_k = static_cast<size_t>(DType::Q6_K), x8 = static_cast<size_t>(DType::Q6_K_X8);
    t.repack[q6_k] = repack_q6_k_x8;
    t.repack_type[q6_k] = DType::Q6_K_X8;
    t.pack_panel[x8] = pack_q6_k_x8_panel;
    t.panel_act[x8] = k_panel_act<Q6_KPanels>;
    t.panel_gemm[x8] = k_panel8_gemm<Q6_KPanels>;
    t.panel_decode[x8] = decode_prefetch_l1 ? q6_k_x8_panel_decode<true> : q6_k_x8_panel_decode<false>;
    t.panel_decode_tokens[x8] =
        decode_prefetch_l1 ? q6_k_x8_panel_decode_tokens<true> : q6_k_x8_panel_decode_tokens<false>;
}
