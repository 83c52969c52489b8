// One-token products (decode) of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) straight from the
// GGUF rows, 8 rows per pass, for the AVX2 and AVX-512 tables. Included inside the anonymous
// namespace of each kernel file after x86_panels.inl (activation facts, the shared accumulation
// order), so each table compiles it with its own dot_u8_s8 (vpdpbusd where kExactU8Dot).

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

// Formats whose 32 quants are 16 bytes of nibbles (Q4_0, Q4_1; Q5_0 and Q5_1 plus a fifth bit from
// their 32-bit qh): two rows share each vector.
template <class F>
constexpr bool nibble_quants() {
    return std::is_same<F, Q4_0Format>::value || std::is_same<F, Q4_1Format>::value || five_bit_format<F>();
}

// Q5_0's (Q5_1's) fifth bits of two rows as 0x10 bytes laid out like their nibbles: `low` holds
// quants 0..15 (qh bits 0..15) of row a in its low 128 bits and of row b in its high 128 bits,
// `high` quants 16..31 (qh bits 16..31). Byte j of a half takes qh byte j / 8 (plus 2 for `high`)
// and tests bit j % 8.
template <class Block>
inline void fifth_bits_of_pair(const Block& a, const Block& b, __m256i* low, __m256i* high) {
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
// vpmaddubsw and a vpmaddwd (Zen 1 runs one of either per 2 cycles); Q5_0's and Q5_1's pair sums stay below
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
        if constexpr (five_bit_format<F>()) {
            __m256i fifth_low, fifth_high;
            fifth_bits_of_pair(a, b, &fifth_low, &fifth_high);
            low = _mm256_or_si256(low, fifth_low);
            high = _mm256_or_si256(high, fifth_high);
        }
        if constexpr (kExactU8Dot) {  // vpdpbusd: the same int32 lanes in two instructions
            pair[r] = dot_u8_s8(dot_u8_s8(_mm256_setzero_si256(), low, x_low), high, x_high);
        } else {
            const __m256i pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(low, x_low), _mm256_maddubs_epi16(high, x_high));
            pair[r] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        }
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

// y[0..8) = vec_dot(row r, x) for 8 rows of w_row_bytes from `rows`; each block step prefetches
// `prefetch_step` bytes of the next panel from `prefetch` on (decode_panel_in_passes), into L1 or
// L2 (prefetch_bytes): on Zen 4 L1's few miss buffers held the stream back (Q8_0 from memory
// 22 -> 38 GFLOP/s into L2, docs/PERFORMANCE.md session 10); on Zen 5 L2 was the slower one
// (session 12).
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
        if constexpr (F::kHasMin) {
            static_assert(offsetof(Block, m) == offsetof(Block, d) + 2, "d and m adjacent");
            __m256 dw, m;
            half_field_pair_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, d), &dw, &m);
            acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[b].d)), _mm256_cvtepi32_ps(isum), acc);
            acc_min = _mm256_fmadd_ps(m, _mm256_set1_ps(act[b].s), acc_min);
        } else {
            const __m256 dw = half_field_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, d));
            acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[b].d)), _mm256_cvtepi32_ps(isum), acc);
        }
    }
    _mm256_storeu_ps(y, F::kHasMin ? _mm256_add_ps(acc, acc_min) : acc);
}

template <class F, bool kL1>
void panel8_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock* act, size_t n) {
    const size_t n_blocks = n / kQK32;
    decode_panel_in_passes(y, static_cast<const uint8_t*>(w), w_row_bytes, n_blocks,
                           [&](float* y_pass, const uint8_t* rows, const uint8_t* prefetch, size_t prefetch_step) {
                               half_panel_decode<F, kL1>(y_pass, rows, w_row_bytes, x, act, n_blocks, prefetch,
                                                         prefetch_step);
                           });
}

// The decode entries of one format: panel_decode with the CPU's prefetch hint (into L1 or L2, see
// half_panel_decode), and decode_act (the activation facts it reads: the panels' own).
template <class F>
void register_panel8_decode(CpuKernels& t, DType type, bool decode_prefetch_l1) {
    const size_t i = static_cast<size_t>(type);
    t.panel_decode[i] = decode_prefetch_l1 ? panel8_decode<F, true> : panel8_decode<F, false>;
    t.decode_act[i] = panel_act<F>;
}

void register_panel_decodes(CpuKernels& t, bool decode_prefetch_l1) {
    register_panel8_decode<Q4_0Format>(t, DType::Q4_0, decode_prefetch_l1);
    register_panel8_decode<Q4_1Format>(t, DType::Q4_1, decode_prefetch_l1);
    register_panel8_decode<Q5_0Format>(t, DType::Q5_0, decode_prefetch_l1);
    register_panel8_decode<Q5_1Format>(t, DType::Q5_1, decode_prefetch_l1);
    register_panel8_decode<Q8_0Format>(t, DType::Q8_0, decode_prefetch_l1);
}
