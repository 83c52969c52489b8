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
// The block dots of 4 row pairs: quants(p, &low, &high) gives pair p's quants 0..15 / 16..31 as
// bytes [row p | row p + 4] (from the GGUF rows, or one load from Q4_0_X8's groups).
template <class Quants>
inline __m256i nibble_pairs_block_dots(const Quants& quants, const int8_t* xq) {
    const __m256i x_low = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq)));
    const __m256i x_high = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + 16)));
    __m256i pair[4];  // pair[r]: lanes 0..3 row r, lanes 4..7 row r + 4
    for (size_t r = 0; r < 4; ++r) {
        __m256i low, high;
        quants(r, &low, &high);
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

template <class F>
inline __m256i nibble_rows_block_dots(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const int8_t* xq) {
    using Block = typename F::Block;
    const auto quants = [&](size_t r, __m256i* low, __m256i* high) {
        const __m256i mask = _mm256_set1_epi8(0x0F);
        const Block& a = *reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte);
        const Block& b = *reinterpret_cast<const Block*>(rows + (r + 4) * w_row_bytes + block_byte);
        const __m256i packed = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)),
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
        *low = _mm256_and_si256(packed, mask);                         // quants 0..15
        *high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);  // quants 16..31
        if constexpr (five_bit_format<F>()) {
            __m256i fifth_low, fifth_high;
            fifth_bits_of_pair(a, b, &fifth_low, &fifth_high);
            *low = _mm256_or_si256(*low, fifth_low);
            *high = _mm256_or_si256(*high, fifth_high);
        }
    };
    return nibble_pairs_block_dots(quants, xq);
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
// L2 (prefetch_bytes): on Zen 4 L1's few miss buffers hold the stream back (Q8_0 from memory
// reads about 1.7x faster prefetched into L2: `matmul_bench Q8_0 1536 8960 1 1 0.5 16`); on Zen 5
// L2 is the slower one.
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

// ---- Q4_0_X8 (ops/q4_0_x8.h): Q4_0 repacked at load --------------------------------------------
// The same int32 block sums and float order as Q4_0's decode and panels, bit for bit.

// y[0..8) for the 8 rows of the group at `group` (n_blocks blocks of kQ4_0X8GroupBytes); prefetch
// as in half_panel_decode.
template <bool kL1>
void q4_0_x8_group_decode(float* y, const uint8_t* group, const void* x, const PanelActBlock* act, size_t n_blocks,
                          const uint8_t* prefetch, size_t prefetch_step) {
    const Q4_0Format::ActBlock* xb = static_cast<const Q4_0Format::ActBlock*>(x);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b, group += kQ4_0X8GroupBytes, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const auto quants = [group](size_t p, __m256i* low, __m256i* high) {
            const __m256i mask = _mm256_set1_epi8(0x0F);
            const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32 * p));
            *low = _mm256_and_si256(packed, mask);
            *high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
        };
        const __m256i isum =
            _mm256_add_epi32(nibble_pairs_block_dots(quants, xb[b].qs), _mm256_set1_epi32(act[b].bias));
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kQ4_0X8DOffset)));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[b].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    _mm256_storeu_ps(y, acc);
}

// A panel of kPanelRows rows = two groups, the second at 8 * w_row_bytes.
template <bool kL1>
void q4_0_x8_panel_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock* act,
                          size_t n) {
    static_assert(kPanelRows == 2 * kQ4_0X8Rows, "a panel is two groups");
    const size_t n_blocks = n / kQK32;
    decode_groups_in_passes<kL1>(
        y, static_cast<const uint8_t*>(w), w_row_bytes, n_blocks,
        [&](float* y_pass, const uint8_t* group, const uint8_t* prefetch, size_t prefetch_step) {
            q4_0_x8_group_decode<kL1>(y_pass, group, x, act, n_blocks, prefetch, prefetch_step);
        });
}

// Prefill: the panel's 16 rows as GGUF blocks again, 16 blocks at a time on the stack (4.5 KiB; see
// pack_q4_k_x8_panel for why not a thread-local buffer), then Q4_0's packer.
void pack_q4_0_x8_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    constexpr size_t kChunk = 16;
    const size_t n_blocks = n / kQK32;
    const uint8_t* groups = static_cast<const uint8_t*>(w);
    BlockQ4_0 rows[kPanelRows * kChunk];
    for (size_t b0 = 0; b0 < n_blocks; b0 += kChunk) {
        const size_t m = std::min(kChunk, n_blocks - b0);
        for (size_t r = 0; r < kPanelRows; ++r) {
            const uint8_t* group = groups + (r / kQ4_0X8Rows) * kQ4_0X8Rows * w_row_bytes + b0 * kQ4_0X8GroupBytes;
            q4_0_x8_row_blocks(rows + r * m, group, r % kQ4_0X8Rows, m * kQK32);
        }
        pack_panel<Q4_0Format>(panel + b0 * kPanelBlockBytes, rows, m * sizeof(BlockQ4_0), m * kQK32);
    }
}

// After the table's Q4_0 panels and decode: the repacked layout takes Q4_0's product and facts.
// No vec_dot: the rows are interleaved (matmul takes whole panels of a Q4_0_X8 matrix).
void register_q4_0_x8(CpuKernels& t, bool decode_prefetch_l1) {
    const size_t q4_0 = static_cast<size_t>(DType::Q4_0), x8 = static_cast<size_t>(DType::Q4_0_X8);
    t.repack[q4_0] = repack_q4_0_x8;
    t.repack_type[q4_0] = DType::Q4_0_X8;
    t.pack_panel[x8] = pack_q4_0_x8_panel;
    t.panel_act[x8] = t.panel_act[q4_0];
    t.panel_gemm[x8] = t.panel_gemm[q4_0];
    t.panel_decode[x8] = decode_prefetch_l1 ? q4_0_x8_panel_decode<true> : q4_0_x8_panel_decode<false>;
    t.decode_act[x8] = t.decode_act[q4_0];
}
