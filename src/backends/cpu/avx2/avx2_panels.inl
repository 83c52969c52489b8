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
    if constexpr (std::is_same<F, Q5_0Format>::value) return 4;
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
// 128: one group's pair sums reach 32,512, so no two groups share an int16 sum).
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
                isum = half_block_dot<F>(half, xb.qs, _mm256_set1_epi32(a.bias));
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

// ---- one token (decode) straight from the GGUF rows --------------------------------------------
// Block by block over 8 rows: each row's block dot as 8 int32 lanes, then one transposing reduction
// turns the 8 rows' vectors into one vector of 8 exact block sums (lane r = row r), so the float
// work is the panels' (same order, bit for bit) at one instruction per 8 rows.

// Int32 lanes of one weight block's dot with the activations, without the offset (added per block
// from the activation facts, once for the 8 rows).
template <class F>
inline __m256i raw_block_dot(const typename F::Block& wb, __m256i xq) {
    if constexpr (signed_quants<F>()) {
        return dot_s8_s8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs)), xq);
    }
    return dot_u8_s8(_mm256_setzero_si256(), F::quants(wb), xq);
}

// Formats whose 32 quants are 16 bytes of nibbles (Q4_0, Q4_1; Q5_0 plus a fifth bit from its
// 32-bit qh): two rows share each vector.
template <class F>
constexpr bool nibble_quants() {
    return std::is_same<F, Q4_0Format>::value || std::is_same<F, Q4_1Format>::value ||
           std::is_same<F, Q5_0Format>::value;
}

// Q5_0's fifth bits of two rows as 0x10 bytes laid out like their nibbles: `low` holds quants 0..15
// (qh bits 0..15) of row a in its low 128 bits and of row b in its high 128 bits, `high` quants
// 16..31 (qh bits 16..31). Byte j of a half takes qh byte j / 8 (plus 2 for `high`) and tests bit
// j % 8.
inline void fifth_bits_of_pair(const BlockQ5_0& a, const BlockQ5_0& b, __m256i* low, __m256i* high) {
    uint32_t qh_a, qh_b;
    std::memcpy(&qh_a, a.qh, 4);
    std::memcpy(&qh_b, b.qh, 4);
    const __m256i qh =
        _mm256_set_m128i(_mm_cvtsi32_si128(static_cast<int>(qh_b)), _mm_cvtsi32_si128(static_cast<int>(qh_a)));
    const __m256i pick_low = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                              0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m256i pick_high = _mm256_add_epi8(pick_low, _mm256_set1_epi8(2));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i fifth = _mm256_set1_epi8(0x10);
    const __m256i set_low = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, pick_low), bit), bit);
    const __m256i set_high = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, pick_high), bit), bit);
    *low = _mm256_and_si256(set_low, fifth);
    *high = _mm256_and_si256(set_high, fifth);
}

// Nibble formats: rows r and r + 4 of the 8 share one vector (row r's 16 bytes of nibbles in the
// low 128 bits, row r + 4's in the high), against the token's quants 0..15 / 16..31 broadcast to
// both halves: per pair of rows one load, one shift, two masks, two vpmaddubsw whose int16 pair
// sums are added (at most 2 * 2 * 15 * 127 = 7,620) and one vpmaddwd, where a row alone took a
// vpmaddubsw and a vpmaddwd (Zen 1 runs one of either per 2 cycles); Q5_0's pair sums stay below
// 2 * 2 * 31 * 127 = 15,748. Three horizontal adds then
// leave lane r = row r. The int32 block sums are the same integers, so the float work and the
// results are the row-by-row path's, bit for bit.
template <class F>
inline __m256i nibble_rows_block_dots(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const int8_t* xq) {
    using Block = typename F::Block;
    const __m256i x_low = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq)));
    const __m256i x_high = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + 16)));
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256i pair[4];  // pair[r]: lanes 0..3 row r, lanes 4..7 row r + 4
    for (size_t r = 0; r < 4; ++r) {
        const Block& a = *reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte);
        const Block& b = *reinterpret_cast<const Block*>(rows + (r + 4) * w_row_bytes + block_byte);
        const __m256i packed = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)),
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
        __m256i low = _mm256_and_si256(packed, mask);                         // quants 0..15
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);  // quants 16..31
        if constexpr (std::is_same<F, Q5_0Format>::value) {
            __m256i fifth_low, fifth_high;
            fifth_bits_of_pair(a, b, &fifth_low, &fifth_high);
            low = _mm256_or_si256(low, fifth_low);
            high = _mm256_or_si256(high, fifth_high);
        }
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, x_low), _mm256_maddubs_epi16(high, x_high));
        pair[r] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    }
    const __m256i h01 = _mm256_hadd_epi32(pair[0], pair[1]);  // [rows 0, 1 | rows 4, 5], two lanes each
    const __m256i h23 = _mm256_hadd_epi32(pair[2], pair[3]);  // [rows 2, 3 | rows 6, 7]
    return _mm256_hadd_epi32(h01, h23);                       // [rows 0..3 | rows 4..7]
}

// The exact int32 block sums of 8 rows (lane r = row r), without the offset.
template <class F>
inline __m256i rows_block_dots(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const int8_t* xq) {
    if constexpr (nibble_quants<F>()) {
        return nibble_rows_block_dots<F>(rows, w_row_bytes, block_byte, xq);
    } else {
        using Block = typename F::Block;
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
        __m256i lanes[8];
        for (size_t r = 0; r < 8; ++r) {
            lanes[r] = raw_block_dot<F>(*reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte), x);
        }
        return sum_lanes_of_8(lanes);
    }
}

// y[0..8) = vec_dot(row r, x) for 8 rows of w_row_bytes from `rows`. The rows are 8 interleaved
// streams, which the hardware prefetcher does not follow well from memory: each block step
// prefetches `prefetch_step` bytes of the next panel instead (one sequential stream, when the rows
// are contiguous), from `prefetch` on, into L1 or L2 (prefetch_bytes): on Zen 4 L1's few miss
// buffers held the stream back (Q8_0 from memory 22 -> 38 GFLOP/s into L2, docs/PERFORMANCE.md
// session 10); on Zen 5 L2 was the slower one (session 12).
template <class F, bool kL1>
void half_panel_decode(float* y, const uint8_t* rows, size_t w_row_bytes, const void* x, const PanelActBlock* act,
                       size_t n_blocks, const uint8_t* prefetch, size_t prefetch_step) {
    using Block = typename F::Block;
    const typename F::ActBlock* xb = static_cast<const typename F::ActBlock*>(x);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const size_t block_byte = b * sizeof(Block);
        const __m256i dots = rows_block_dots<F>(rows, w_row_bytes, block_byte, xb[b].qs);
        const __m256i isum = _mm256_add_epi32(dots, _mm256_set1_epi32(act[b].bias));
        const __m256 dw = half_field_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, d));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[b].d)), _mm256_cvtepi32_ps(isum), acc);
        if constexpr (F::kHasMin) {
            const __m256 m = half_field_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, m));
            acc_min = _mm256_fmadd_ps(m, _mm256_set1_ps(act[b].s), acc_min);
        }
    }
    _mm256_storeu_ps(y, F::kHasMin ? _mm256_add_ps(acc, acc_min) : acc);
}

template <class F, bool kL1>
void panel8_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock* act, size_t n) {
    const uint8_t* rows = static_cast<const uint8_t*>(w);
    const size_t n_blocks = n / kQK32;
    const size_t steps = (kPanelRows / kHalfRows) * n_blocks;
    const size_t prefetch_step = ((kPanelRows * w_row_bytes + steps - 1) / steps + 63) / 64 * 64;
    const uint8_t* next_panel = rows + kPanelRows * w_row_bytes;
    for (size_t h = 0; h < kPanelRows / kHalfRows; ++h) {
        half_panel_decode<F, kL1>(y + kHalfRows * h, rows + kHalfRows * h * w_row_bytes, w_row_bytes, x, act, n_blocks,
                                  next_panel + h * n_blocks * prefetch_step, prefetch_step);
    }
}

template <class F>
void register_panel8(CpuKernels& t, DType type, bool decode_prefetch_l1) {
    const size_t i = static_cast<size_t>(type);
    t.vec_dot[i] = panel_vec_dot<F>;
    t.gemm_tile[i] = nullptr;  // the 4-row tiles accumulate in another order than panel_vec_dot
    t.pack_panel[i] = pack_panel<F>;
    t.panel_act[i] = panel_act<F>;
    t.panel_gemm[i] = panel8_gemm<F>;
    t.panel_decode[i] = decode_prefetch_l1 ? panel8_decode<F, true> : panel8_decode<F, false>;
    t.decode_act[i] = panel_act<F>;
}

void register_panels(CpuKernels& t, bool decode_prefetch_l1) {
    register_panel8<Q4_0Format>(t, DType::Q4_0, decode_prefetch_l1);
    register_panel8<Q4_1Format>(t, DType::Q4_1, decode_prefetch_l1);
    register_panel8<Q5_0Format>(t, DType::Q5_0, decode_prefetch_l1);
    register_panel8<Q8_0Format>(t, DType::Q8_0, decode_prefetch_l1);
}
