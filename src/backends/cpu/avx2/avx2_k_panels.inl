// Row panels and one-token decode of the K-quant formats (Q4_K, Q5_K, Q6_K, Q8_K activations) for
// the AVX2 table. Included inside the anonymous namespace of avx2_kernels.cpp after avx2_panels.inl
// (transpose_8x8_dwords, kHalfRows, kPanel8MaxTokens; the 8-row reductions are in x86_quant_kernels.inl).
//
// A super-block of 256 is 8 chunks c of 32 quants (Q6_K: 16 sub-blocks i of 16, chunk c = sub-blocks
// 2c and 2c + 1). Accumulation order, shared by vec_dot, the panels and the decode kernel so that
// they agree bit for bit: per super-block the exact int32 sums
//   isum = sum_c scale_c * (q_c . x_c)                       (Q4_K, Q5_K; q unsigned, 4 or 5 bits)
//   isum = sum_i scale_i * (q_i . x_i) - 32 * sum_i scale_i * bsums_i     (Q6_K; q in 0..63)
//   mdot = sum_c min_c * (bsums[2c] + bsums[2c + 1])         (Q4_K, Q5_K)
// then in super-block order
//   acc = fma(d_w * d_x, float(isum), acc)      acc_min = fma(dmin_w * d_x, float(mdot), acc_min)
// and the result acc - acc_min (Q6_K: acc). Int32 bounds (|x| <= 128, scales and mins 6-bit
// unsigned, Q6_K scales int8): |isum| <= 256 * 63 * 128 * 128 + 32 * 16 * 128 * 2048 < 2^29.
//
// Int16 stage: vpmaddubsw gives pair sums q0 x0 + q1 x1 of at most 2 * qmax * 128 (no saturation);
// the pair sums of G groups of 4 quants are added in int16 before one vpmaddwd with the scale, as
// long as G * 2 * qmax * 128 < 2^15: Q4_K G = 8 (30,720), Q5_K G = 4 (31,744). Q6_K in the panels:
// the 4 groups of a sub-block (G = 4) minus the token's 32 * (pair sums of x) give the pair sums of
// (q - 32) x, at most 4 * 2 * 32 * 128 = 32,768 in magnitude, reached only by q = 0 against x = -128
// everywhere (the Q8_K quantizer gives |x| <= 127: 32,512). The int16 adds wrap, so only the final
// value has to fit, not the partial sums.

// Panel layout: x86_k_panel_layout.h.

// Token facts per super-block (PanelActBlock c of the 8 per super-block): d = d_x, and two int16
// packed in an int32: Q4_K/Q5_K bias (c < 4) = the bsums pair sums (P_2c, P_2c+1) with
// P_k = bsums[2k] + bsums[2k+1]; Q6_K bias / bias2 = the offset of sub-block 2c / 2c + 1: 32 times
// the sums of its quants x_j with j % 4 in {0, 1} / in {2, 3} (what the 4 groups' maddubs pair sums
// of 32 * x come to, lane by lane).

inline int32_t two_i16(int a, int b) {
    return static_cast<int32_t>(static_cast<uint16_t>(a) | (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16));
}

// Int16 lanes of `words` (both 128-bit halves alike) -> every int16 lane: word w.
inline __m256i word_broadcast(__m256i words, int w) {
    return _mm256_shuffle_epi8(words, _mm256_set1_epi16(static_cast<short>((2 * w) | ((2 * w + 1) << 8))));
}

// Dword d of each 128-bit half of `v` -> all four dwords of that half.
inline __m256i dword_broadcast(__m256i v, int d) {
    switch (d) {
        case 0:
            return _mm256_shuffle_epi32(v, 0x00);
        case 1:
            return _mm256_shuffle_epi32(v, 0x55);
        case 2:
            return _mm256_shuffle_epi32(v, 0xAA);
        default:
            return _mm256_shuffle_epi32(v, 0xFF);
    }
}

// The scales of two rows' Q4_K super-blocks for the paired-row kernels, from their bytes [row a's
// scale_0..7 min_0..7 | row b's]: int16 pairs (scale_c, scale_c) as dwords, c < 4 in `low`, c >= 4
// in `high`, so that chunk(c), the int16 vector [a's scale_c x 8 | b's scale_c x 8], is one vpshufd
// (which issues on all four vector ALU pipes of Zen 5, where a vpshufb word broadcast issues on two:
// 2-4% more Q4_K decode throughput in `matmul_bench Q4_K 1536 8960 1 1`).
struct KScalePairs {
    __m256i low, high;
    explicit KScalePairs(__m256i bytes) {
        low = _mm256_shuffle_epi8(bytes, _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 0, -1,
                                                          0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1));
        high = _mm256_shuffle_epi8(bytes, _mm256_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1, 4,
                                                           -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1));
    }
    __m256i chunk(int c) const { return dword_broadcast(c < 4 ? low : high, c % 4); }
};

// One token's super-block, as the row kernels want it.
struct KToken {
    const BlockQ8_K* b;
    __m128i pairs;        // int16 P_0..P_7 (Q4_K/Q5_K mins)
    __m256i pairs_twice;  // pairs in both 128-bit halves (Q4_K rows in pairs)
    __m256i bsums;        // int16 bsums_0..15 (Q6_K offset)
    KToken() = default;   // arrays of tokens (the several-token decodes) are filled in a loop
    explicit KToken(const BlockQ8_K* block) : b(block) {
        bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->bsums));
        pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        pairs_twice = _mm256_broadcastsi128_si256(pairs);
    }
    __m256i chunk(int c) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * c)); }
    // The same token, for a row loop: its quants are then read per row from L1 (vpmaddubsw's memory
    // operand). Left to itself GCC 12 hoists the 8 invariant chunk loads out of the decode's row loop
    // into 8 of AVX2's 16 registers and spills the rows' partial sums instead, which costs about a
    // third of the Q6_K decode and 6% of Q4_K's (`matmul_bench Q6_K 1536 8960 1 1`, the same for
    // Q4_K). The empty asm hides the pointer's value from the optimizer; it emits no instruction.
    KToken read_from_l1() const {
        KToken t = *this;
        asm("" : "+r"(t.b));
        return t;
    }
};

// ---- formats -------------------------------------------------------------------------------------

// Each format's quants of a super-block are kRaw vectors of 32 bytes ("raw", as stored), and chunk c
// is a bytewise function of them (chunk_of): byte l of every raw vector belongs to quant l of the
// chunk. So the panel packer transposes the raw vectors across 8 rows (by dwords) and applies
// chunk_of to the transposed vectors, instead of transposing 8 unpacked chunks: half the shuffles
// for 4-bit quants. (The 16-bit shifts below move bits across a byte only where a mask drops them.)

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// chunk 2j: low nibbles of raw j, chunk 2j + 1: high nibbles
inline __m256i k_nibbles(const __m256i* raw, int c) {
    const __m256i bits = raw[c / 2];
    return _mm256_and_si256(c & 1 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0x0F));
}

// Q4_K / Q5_K scale facts of one row's super-block: scales as int16 words, mins as 8 int16.
struct KScaleWords {
    __m256i words;  // int16 scale_0..7 in both halves
    __m128i mins;   // int16 min_0..7
    explicit KScaleWords(const uint8_t* packed) {
        const __m128i bytes = unpack_k_scales_sse(packed);
        words = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes));
        mins = _mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8));
    }
    __m256i chunk(int c) const { return word_broadcast(words, c); }
};

// Packs the scale words and min words of a Q4_K / Q5_K super-block (see the panel layout).
inline void pack_k_scale_words(const uint8_t* packed, uint32_t* words /* [8] */, uint32_t* mins /* [4] */) {
    uint32_t sm[4];
    unpack_k_scales(packed, sm);
    const uint8_t* s = reinterpret_cast<const uint8_t*>(sm);
    for (int c = 0; c < 8; ++c) words[c] = static_cast<uint32_t>(two_i16(s[c], s[c]));
    for (int k = 0; k < 4; ++k) mins[k] = static_cast<uint32_t>(two_i16(s[8 + 2 * k], s[9 + 2 * k]));
}

struct Q4_KPanels : Q4_KPanelFacts {
    using Block = BlockQ4_K;
    static constexpr int kRaw = 4;  // qs
    using Scales = KScaleWords;
    static Scales scales(const Block& b) { return Scales(b.scales); }
    static __m256i raw(const Block& b, int i) { return load32(b.qs + 32 * i); }
    static __m256i chunk_of(const __m256i* raw, int c) { return k_nibbles(raw, c); }
    static void pack_scales(const Block& b, uint32_t* words, uint32_t* mins) {
        pack_k_scale_words(b.scales, words, mins);
    }
    static float dmin(const Block& b) { return h2f(b.dmin); }
};

struct Q5_KPanels : Q5_KPanelFacts {
    using Block = BlockQ5_K;
    static constexpr int kRaw = 5;  // qs, qh
    using Scales = KScaleWords;
    static Scales scales(const Block& b) { return Scales(b.scales); }
    static __m256i raw(const Block& b, int i) { return i < 4 ? load32(b.qs + 32 * i) : load32(b.qh); }
    // chunk c takes bit c of each qh byte as its bit 4: masked first, then moved by 4 - c (the
    // 16-bit shifts move only the masked bit, which stays inside its byte)
    static __m256i chunk_of(const __m256i* raw, int c) {
        const __m256i bit = _mm256_and_si256(raw[4], _mm256_set1_epi8(static_cast<char>(1 << c)));
        const __m256i fifth = c < 4 ? _mm256_slli_epi16(bit, 4 - c) : c > 4 ? _mm256_srli_epi16(bit, c - 4) : bit;
        return _mm256_or_si256(k_nibbles(raw, c), fifth);
    }
    static void pack_scales(const Block& b, uint32_t* words, uint32_t* mins) {
        pack_k_scale_words(b.scales, words, mins);
    }
    static float dmin(const Block& b) { return h2f(b.dmin); }
};

struct Q6_KPanels : Q6_KPanelFacts {
    using Block = BlockQ6_K;
    // int16 scales; chunk(c): scale 2c in the low 128-bit half, 2c + 1 in the high half (the chunk's
    // two sub-blocks of 16, as maddubs pairs lie in the vector)
    struct Scales {
        __m256i all;  // int16 scale_0..15
        // int16 (scale_i, scale_i) in dword k of the low half for i = 2k (+ 8), of the high half for
        // i = 2k + 1 (+ 8): chunk c's scales are then one vpshufd away (it issues on all four
        // vector ALU pipes; vpshufb and the lane-crossing shuffles on two)
        __m256i even_odd_low, even_odd_high;
        explicit Scales(const int8_t* s) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
            all = _mm256_cvtepi8_epi16(bytes);
            const __m256i both = _mm256_broadcastsi128_si256(bytes);
            // each scale byte into the high byte of an int16, then an arithmetic shift sign-extends it
            even_odd_low = _mm256_srai_epi16(
                _mm256_shuffle_epi8(both, _mm256_setr_epi8(-1, 0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1,
                                                           1, -1, 1, -1, 3, -1, 3, -1, 5, -1, 5, -1, 7, -1, 7)),
                8);
            even_odd_high =
                _mm256_srai_epi16(_mm256_shuffle_epi8(both, _mm256_setr_epi8(-1, 8, -1, 8, -1, 10, -1, 10, -1, 12, -1,
                                                                             12, -1, 14, -1, 14, -1, 9, -1, 9, -1, 11,
                                                                             -1, 11, -1, 13, -1, 13, -1, 15, -1, 15)),
                                  8);
        }
        __m256i chunk(int c) const { return dword_broadcast(c < 4 ? even_odd_low : even_odd_high, c % 4); }
    };
    static Scales scales(const Block& b) { return Scales(b.scales); }
    static constexpr int kRaw = 6;  // ql[0..128), qh[0..64)
    static __m256i raw(const Block& b, int i) { return i < 4 ? load32(b.ql + 32 * i) : load32(b.qh + 32 * (i - 4)); }
    // chunk c = 4 * half + k: low 4 bits from ql[64 half + 32 (k & 1)] (high nibble when k >= 2),
    // bits 4, 5 from bits 2k, 2k + 1 of qh[32 half]
    static __m256i chunk_of(const __m256i* raw, int c) {
        const int half = c / 4, k = c % 4;
        const __m256i ql = raw[2 * half + (k & 1)];
        const __m256i qh = raw[4 + half];
        const __m256i low = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
        __m256i h;  // bits (2k, 2k + 1) moved to (4, 5); the 16-bit shifts' spill-over is masked off
        switch (k) {
            case 0:
                h = _mm256_slli_epi16(qh, 4);
                break;
            case 1:
                h = _mm256_slli_epi16(qh, 2);
                break;
            case 2:
                h = qh;
                break;
            default:
                h = _mm256_srli_epi16(qh, 2);
                break;
        }
        return _mm256_or_si256(low, _mm256_and_si256(h, _mm256_set1_epi8(0x30)));
    }
    template <class B>  // BlockQ6_K, or Q6_K_X8's row (avx2_q6_k_x8.inl): the same 16 scales
    static void pack_scales(const B& b, uint32_t* words, uint32_t*) {
        for (int c = 0; c < 8; ++c) words[c] = static_cast<uint32_t>(two_i16(b.scales[2 * c], b.scales[2 * c + 1]));
    }
    template <class B>
    static float dmin(const B&) {
        return 0.0f;
    }
};

// ---- one row's super-block (vec_dot and decode) --------------------------------------------------

// 8 int32 lanes of one row's super-block. Q4_K/Q5_K: low 128 bits 4 lanes summing to isum, high 128
// bits 4 lanes summing to mdot; Q6_K: 8 lanes summing to isum.
template <class F>
inline __m256i k_row_lanes(const typename F::Block& b, const KToken& x) {
    const typename F::Scales s = F::scales(b);
    __m256i raw[F::kRaw];
    for (int i = 0; i < F::kRaw; ++i) raw[i] = F::raw(b, i);
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
        const __m256i pairs = _mm256_maddubs_epi16(F::chunk_of(raw, c), x.chunk(c));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, s.chunk(c)));
    }
    if constexpr (F::kHasMins) {
        const __m128i isum4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        return _mm256_set_m128i(_mm_madd_epi16(s.mins, x.pairs), isum4);
    } else {
        const __m256i offset = _mm256_madd_epi16(s.all, x.bsums);  // sum_i scale_i * bsums_i, 8 lanes
        return _mm256_sub_epi32(acc, _mm256_slli_epi32(offset, 5));
    }
}

// k_row_lanes of one row for T tokens at once, out[t] for token tok[t] (its quants read through
// qs[t], see opaque()): each chunk is unpacked once for all of them. The same integers.
template <class F, int T>
inline void k_row_lanes_tokens(const typename F::Block& b, const int8_t* const* qs, const KToken* tok, __m256i* out) {
    const typename F::Scales s = F::scales(b);
    __m256i raw[F::kRaw];
    for (int i = 0; i < F::kRaw; ++i) raw[i] = F::raw(b, i);
    __m256i acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
        const __m256i q = F::chunk_of(raw, c);
        const __m256i scale = s.chunk(c);
        for (int t = 0; t < T; ++t) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[t] + 32 * c));
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scale));
        }
    }
    for (int t = 0; t < T; ++t) {
        if constexpr (F::kHasMins) {
            const __m128i isum4 = _mm_add_epi32(_mm256_castsi256_si128(acc[t]), _mm256_extracti128_si256(acc[t], 1));
            out[t] = _mm256_set_m128i(_mm_madd_epi16(s.mins, tok[t].pairs), isum4);
        } else {
            const __m256i offset = _mm256_madd_epi16(s.all, tok[t].bsums);  // sum_i scale_i * bsums_i, 8 lanes
            out[t] = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(offset, 5));
        }
    }
}

template <class F>
float k_panel_vec_dot(const void* w, const void* x, size_t n) {
    const typename F::Block* wb = static_cast<const typename F::Block*>(w);
    const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
    float acc = 0.0f, acc_min = 0.0f;
    for (size_t sb = 0; sb < n / kQKK; ++sb) {
        const __m256i v = k_row_lanes<F>(wb[sb], KToken(xb + sb));
        if constexpr (F::kHasMins) {
            const __m256i isum = _mm256_zextsi128_si256(_mm256_castsi256_si128(v));
            const __m256i mdot = _mm256_zextsi128_si256(_mm256_extracti128_si256(v, 1));
            acc = std::fma(h2f(wb[sb].d) * xb[sb].d, static_cast<float>(hsum_epi32(isum)), acc);
            acc_min = std::fma(F::dmin(wb[sb]) * xb[sb].d, static_cast<float>(hsum_epi32(mdot)), acc_min);
        } else {
            acc = std::fma(h2f(wb[sb].d) * xb[sb].d, static_cast<float>(hsum_epi32(v)), acc);
        }
    }
    return F::kHasMins ? acc - acc_min : acc;
}

// ---- prefill: panels ------------------------------------------------------------------------------

// What the packer reads of a panel's rows, from rows laid out as blocks of F (Derived::block(r, sb)
// and Derived::d(r, sb)): raw vector i, the scale and min words and dmin of row r's super-block sb.
template <class F, class Derived>
struct KBlockRows {
    const typename F::Block& block_of(size_t r, size_t sb) const {
        return static_cast<const Derived*>(this)->block(r, sb);
    }
    __m256i raw(size_t r, size_t sb, int i) const { return F::raw(block_of(r, sb), i); }
    void pack_scales(size_t r, size_t sb, uint32_t* words, uint32_t* mins) const {
        F::pack_scales(block_of(r, sb), words, mins);
    }
    float dmin(size_t r, size_t sb) const { return F::dmin(block_of(r, sb)); }
};

// The panel's rows as the GGUF file has them: row r's super-block sb and its d.
template <class F>
struct GgufKRows : KBlockRows<F, GgufKRows<F>> {
    using Block = typename F::Block;
    const uint8_t* rows;
    size_t row_bytes;
    GgufKRows(const uint8_t* rows_in, size_t row_bytes_in) : rows(rows_in), row_bytes(row_bytes_in) {}
    const Block& block(size_t r, size_t sb) const { return reinterpret_cast<const Block*>(rows + r * row_bytes)[sb]; }
    float d(size_t r, size_t sb) const { return h2f(block(r, sb).d); }
};

// Packs the kPanelRows rows that `rows` gives (raw, pack_scales, d, dmin of row r's super-block sb:
// GgufKRows or a repacked layout's) into n / 256 panel super-blocks.
template <class F, class Rows>
void pack_k_panel_rows(uint8_t* panel, const Rows& rows, size_t n) {
    for (size_t sb = 0; sb < n / kQKK; ++sb, panel += kKPanelBytes) {
        for (size_t half = 0; half < kPanelRows / kHalfRows; ++half) {
            __m256i t[F::kRaw][8];  // t[i][g]: dword g of raw vector i of the 8 rows (lane r = row r)
            for (int i = 0; i < F::kRaw; ++i) {
                __m256i u[kHalfRows];
                for (size_t r = 0; r < kHalfRows; ++r) u[r] = rows.raw(kHalfRows * half + r, sb, i);
                transpose_8x8_dwords(u, t[i]);
            }
            for (int g = 0; g < 8; ++g) {
                __m256i raw_g[F::kRaw];
                for (int i = 0; i < F::kRaw; ++i) raw_g[i] = t[i][g];
                for (int c = 0; c < 8; ++c) {
                    uint8_t* dst = panel + (8 * c + g) * kPanelGroupBytes + 32 * half;
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), F::chunk_of(raw_g, c));
                }
            }
        }
        alignas(32) uint32_t words[8][kPanelRows], mins[4][kPanelRows] = {};
        alignas(32) float d[kPanelRows], dmin[kPanelRows];
        for (size_t r = 0; r < kPanelRows; ++r) {
            uint32_t wr[8], mr[4] = {};
            rows.pack_scales(r, sb, wr, mr);
            for (int e = 0; e < 8; ++e) words[e][r] = wr[e];
            for (int e = 0; e < 4; ++e) mins[e][r] = mr[e];
            d[r] = rows.d(r, sb);
            dmin[r] = rows.dmin(r, sb);
        }
        std::memcpy(panel + kKScaleOffset, words, sizeof(words));
        std::memcpy(panel + kKMinOffset, mins, sizeof(mins));
        std::memcpy(panel + kKDOffset, d, sizeof(d));
        std::memcpy(panel + kKDminOffset, dmin, sizeof(dmin));
    }
}

template <class F>
void pack_k_panel(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n) {
    pack_k_panel_rows<F>(panel, GgufKRows<F>(static_cast<const uint8_t*>(w), w_row_bytes), n);
}

// Q6_K: 32 * (x_j summed over j % 4 in {0, 1}, and over j % 4 in {2, 3}) of 16 quants, as int16.
inline int32_t q6_k_offset_pairs(const int8_t* x) {
    int lo = 0, hi = 0;
    for (int j = 0; j < 16; j += 4) {
        lo += x[j] + x[j + 1];
        hi += x[j + 2] + x[j + 3];
    }
    return two_i16(32 * lo, 32 * hi);
}

template <class F>
void k_panel_act(PanelActBlock* act, const void* x, size_t n) {
    const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
    for (size_t sb = 0; sb < n / kQKK; ++sb, act += 8) {
        const int16_t* s = xb[sb].bsums;
        for (int c = 0; c < 8; ++c) {
            act[c].d = xb[sb].d;
            if constexpr (F::kHasMins) {
                act[c].bias = c < 4 ? two_i16(s[4 * c] + s[4 * c + 1], s[4 * c + 2] + s[4 * c + 3]) : 0;
            }
            act[c].s = 0.0f;
            act[c].bias2 = 0;
            if constexpr (!F::kHasMins) {
                act[c].bias = q6_k_offset_pairs(xb[sb].qs + 32 * c);
                act[c].bias2 = q6_k_offset_pairs(xb[sb].qs + 32 * c + 16);
            }
        }
    }
}

// The scale of groups g0.. of chunk c in every lane's int16 pair (lane r = row r of the half).
template <class F>
inline __m256i k_panel_scale(const uint8_t* sb_half, int c, int g0) {
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb_half + kKScaleOffset + 64 * c));
    if constexpr (F::kHasMins) return words;
    // Q6_K: (scale_2c, scale_2c+1) -> the sub-block's scale in both words of each dword (groups
    // 0..3: 2c); byte indices are per 128-bit half: dword i takes bytes 4i + (0, 1, 0, 1) or (2, 3, 2, 3)
    const __m256i dword_base =
        _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
    return _mm256_shuffle_epi8(words, _mm256_add_epi8(dword_base, _mm256_set1_epi32(g0 < 4 ? 0x01000100 : 0x03020302)));
}

// Sum over the `count` int16-pair fields at `field` of madd(field_k, token's bias_k): per row the
// mins dot (Q4_K/Q5_K), exact int32.
inline __m256i k_panel_pair_dot(const uint8_t* field, const PanelActBlock* a, int count) {
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < count; ++k) {
        const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(field + 64 * k));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(f, _mm256_set1_epi32(a[k].bias)));
    }
    return sum;
}

// Int32 lanes (lane r = row r of the half) of isum for one token's super-block xq (a: its 8 facts);
// the mins are not in it. One token at a time keeps the live registers few (the group vectors are
// reloaded per token from L1: loads are not the limit, the one vpmaddubsw / vpmaddwd port is).
template <class F>
inline __m256i k_panel_isum(const uint8_t* sb_half, const int8_t* xq, const PanelActBlock* a) {
    constexpr int G = F::kGroupsPerSum;
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
        for (int g0 = 0; g0 < 8; g0 += G) {
            __m256i pairs = _mm256_setzero_si256();
            for (int g = g0; g < g0 + G; ++g) {
                const uint8_t* wq = sb_half + (8 * c + g) * kPanelGroupBytes;
                int32_t x4;
                std::memcpy(&x4, xq + 32 * c + 4 * g, 4);
                const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq));
                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4)));
            }
            if constexpr (!F::kHasMins) {  // Q6_K: (q - 32) x, see the int16 bound above
                pairs = _mm256_sub_epi16(pairs, _mm256_set1_epi32(g0 < 4 ? a[c].bias : a[c].bias2));
            }
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, k_panel_scale<F>(sb_half, c, g0)));
        }
    }
    return isum;
}

// y: [T] rows of y_stride, 8 outputs each  <-  one panel half [n_sb] x T activation rows.
// half: the panel's first byte plus 32 * h.
template <class F, int T>
void k_half_panel_tile(float* y, size_t y_stride, const uint8_t* half, const uint8_t* x, size_t x_row_bytes,
                       const PanelActBlock* act, size_t act_row_blocks, size_t n_sb) {
    __m256 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, half += kKPanelBytes) {
        const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(half + kKDOffset));
        for (int t = 0; t < T; ++t) {
            const int8_t* xq = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes)[sb].qs;
            const PanelActBlock* a = act + t * act_row_blocks + 8 * sb;
            const __m256i isum = k_panel_isum<F>(half, xq, a);
            const __m256 dx = _mm256_set1_ps(a[0].d);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc[t]);
            if constexpr (F::kHasMins) {
                const __m256 dmin = _mm256_loadu_ps(reinterpret_cast<const float*>(half + kKDminOffset));
                const __m256i mdot = k_panel_pair_dot(half + kKMinOffset, a, 4);
                acc_min[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mdot), acc_min[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * y_stride, F::kHasMins ? _mm256_sub_ps(acc[t], acc_min[t]) : acc[t]);
    }
}

template <class F>
void k_panel8_gemm(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                   const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens) {
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    const size_t n_sb = n / kQKK;
    for (size_t h = 0; h < kPanelRows / kHalfRows; ++h) {
        const uint8_t* half = panel + 32 * h;
        for (size_t t0 = 0; t0 < n_tokens; t0 += kPanel8MaxTokens) {
            float* yt = y + t0 * y_stride + kHalfRows * h;
            const uint8_t* xt = xp + t0 * x_row_bytes;
            const PanelActBlock* at = act + t0 * act_row_blocks;
            switch (std::min(kPanel8MaxTokens, n_tokens - t0)) {
                case 1:
                    k_half_panel_tile<F, 1>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, n_sb);
                    break;
                case 2:
                    k_half_panel_tile<F, 2>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, n_sb);
                    break;
                case 3:
                    k_half_panel_tile<F, 3>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, n_sb);
                    break;
                default:
                    k_half_panel_tile<F, 4>(yt, y_stride, half, xt, x_row_bytes, at, act_row_blocks, n_sb);
                    break;
            }
        }
    }
}

// ---- decode: one token straight from the GGUF rows -------------------------------------------------

// Q4_K, rows a and b of one super-block in one vector pair: a's 16-byte halves of each raw vector in
// the low 128 bits, b's in the high, so that each chunk's two halves of int16 pair sums (at most
// 2 * 2 * 15 * 127 = 7,620) are added before one vpmaddwd with [a's scale | b's scale]: per pair of
// rows 16 vpmaddubsw and 8 vpmaddwd, where the row path takes 16 and 16 (Zen 1 runs one of either
// per 2 cycles). part(j, half) gives [a's | b's] 16 bytes 32 j + 16 half of qs (from the GGUF rows,
// or one load from Q4_K_X8's groups). Returns isum's lanes: 0..3 row a, 4..7 row b.
template <class Part>
inline __m256i q4_k_pair_isum(const Part& part, const KScalePairs& scales, const KToken& x) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {  // raw vector j: chunk 2j (low nibbles) and 2j + 1 (high nibbles)
        __m256i low_pairs = _mm256_setzero_si256(), high_pairs = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {  // quants 16 * half .. 16 * half + 15 of both chunks
            const __m256i packed = part(j, half);
            const __m256i x_low = _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.b->qs + 64 * j + 16 * half)));
            const __m256i x_high = _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.b->qs + 64 * j + 32 + 16 * half)));
            low_pairs = _mm256_add_epi16(low_pairs, _mm256_maddubs_epi16(_mm256_and_si256(packed, mask), x_low));
            high_pairs = _mm256_add_epi16(
                high_pairs, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(packed, 4), mask), x_high));
        }
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(low_pairs, scales.chunk(2 * j)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(high_pairs, scales.chunk(2 * j + 1)));
    }
    return acc;
}

// *isum / *mdot of GGUF rows a and b: lanes 0..3 row a, 4..7 row b (the same integers as k_row_lanes).
inline void q4_k_pair_lanes(const BlockQ4_K& a, const BlockQ4_K& b, const KToken& x, __m256i* isum, __m256i* mdot) {
    const __m256i packed_scales = unpack_k_scales_pair(a.scales, b.scales);  // [a's | b's] scale_0..7, min_0..7
    const auto part = [&](int j, int half) {
        const size_t at = 32 * j + 16 * half;
        return _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + at)),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + at)));
    };
    *isum = q4_k_pair_isum(part, KScalePairs(packed_scales), x);
    *mdot = _mm256_madd_epi16(_mm256_unpackhi_epi8(packed_scales, _mm256_setzero_si256()), x.pairs_twice);
}

// Q4_K: the exact isum and mdot of 8 rows' super-block (lane r = row r), rows r and r + 4 paired.
inline void q4_k_rows_sums(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const KToken& x, __m256i* isum,
                           __m256i* mdot) {
    __m256i is[4], md[4];
    for (size_t r = 0; r < 4; ++r) {
        q4_k_pair_lanes(*reinterpret_cast<const BlockQ4_K*>(rows + r * w_row_bytes + block_byte),
                        *reinterpret_cast<const BlockQ4_K*>(rows + (r + 4) * w_row_bytes + block_byte),
                        x.read_from_l1(), &is[r], &md[r]);
    }
    // pair r: [row r | row r + 4], 4 lanes each -> [rows 0..3 | rows 4..7]
    *isum = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
    *mdot = _mm256_hadd_epi32(_mm256_hadd_epi32(md[0], md[1]), _mm256_hadd_epi32(md[2], md[3]));
}

// The exact int32 isum and (Q4_K/Q5_K) mdot of 8 rows' super-block, lane r = row r: Q4_K with rows
// paired, the others row by row (Q6_K: mdot left unset).
template <class F>
inline void k_rows_sums(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, const KToken& tok, __m256i* isum,
                        __m256i* mdot) {
    if constexpr (std::is_same<F, Q4_KPanels>::value) {
        q4_k_rows_sums(rows, w_row_bytes, block_byte, tok, isum, mdot);
    } else {
        using Block = typename F::Block;
        __m256i lanes[kDecodeRows];
        for (size_t r = 0; r < kDecodeRows; ++r) {
            lanes[r] = k_row_lanes<F>(*reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte),
                                      tok.read_from_l1());
        }
        if constexpr (F::kHasMins) {
            sum_halves_of_8(lanes, isum, mdot);
        } else {
            *isum = sum_lanes_of_8(lanes);
        }
    }
}

// y[0..8) = vec_dot(row r, x) for 8 rows of w_row_bytes from `rows`; each super-block step
// prefetches `prefetch_step` bytes of the next panel from `prefetch` on (see half_panel_decode).
template <class F, bool kL1>
void k_half_panel_decode(float* y, const uint8_t* rows, size_t w_row_bytes, const BlockQ8_K* xb, size_t n_sb,
                         const uint8_t* prefetch, size_t prefetch_step) {
    using Block = typename F::Block;
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const KToken tok(xb + sb);
        const size_t block_byte = sb * sizeof(Block);
        __m256i isum, mdot = _mm256_setzero_si256();  // Q6_K leaves mdot unset
        k_rows_sums<F>(rows, w_row_bytes, block_byte, tok, &isum, &mdot);
        k_decode_scale_step<Block, F::kHasMins>(rows, w_row_bytes, block_byte, _mm256_set1_ps(xb[sb].d), isum, mdot,
                                                &acc, &acc_min);
    }
    _mm256_storeu_ps(y, F::kHasMins ? _mm256_sub_ps(acc, acc_min) : acc);
}

template <class F, bool kL1>
void k_panel8_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock*, size_t n) {
    const size_t n_sb = n / kQKK;
    decode_panel_in_passes(y, static_cast<const uint8_t*>(w), w_row_bytes, n_sb,
                           [&](float* y_pass, const uint8_t* rows, const uint8_t* prefetch, size_t prefetch_step) {
                               k_half_panel_decode<F, kL1>(y_pass, rows, w_row_bytes, static_cast<const BlockQ8_K*>(x),
                                                           n_sb, prefetch, prefetch_step);
                           });
}

// y[t * y_stride + r] for tokens t < T of `x` (rows of x_row_bytes) and 8 rows of w_row_bytes from
// `rows`: k_half_panel_decode's integers and float order per token, each row's chunks unpacked once
// for the T tokens.
template <class F, bool kL1, int T>
void k_half_panel_decode_tokens(float* y, size_t y_stride, const uint8_t* rows, size_t w_row_bytes, const uint8_t* x,
                                size_t x_row_bytes, size_t n_sb, const uint8_t* prefetch, size_t prefetch_step) {
    using Block = typename F::Block;
    __m256 acc[T], acc_min[T];
    for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < n_sb; ++sb, prefetch += prefetch_step) {
        prefetch_bytes<kL1>(prefetch, prefetch_step);
        const size_t block_byte = sb * sizeof(Block);
        KToken tok[T];
        for (int t = 0; t < T; ++t) tok[t] = KToken(reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + sb);
        __m256i lanes[T][kDecodeRows];
        for (size_t r = 0; r < kDecodeRows; ++r) {
            const int8_t* qs[T];
            for (int t = 0; t < T; ++t) qs[t] = opaque(tok[t].b->qs);
            __m256i row[T];
            k_row_lanes_tokens<F, T>(*reinterpret_cast<const Block*>(rows + r * w_row_bytes + block_byte), qs, tok,
                                     row);
            for (int t = 0; t < T; ++t) lanes[t][r] = row[t];
        }
        for (int t = 0; t < T; ++t) {
            __m256i isum, mdot = _mm256_setzero_si256();  // Q6_K leaves mdot unset
            if constexpr (F::kHasMins) {
                sum_halves_of_8(lanes[t], &isum, &mdot);
            } else {
                isum = sum_lanes_of_8(lanes[t]);
            }
            k_decode_scale_step<Block, F::kHasMins>(rows, w_row_bytes, block_byte, _mm256_set1_ps(tok[t].b->d), isum,
                                                    mdot, &acc[t], &acc_min[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * y_stride, F::kHasMins ? _mm256_sub_ps(acc[t], acc_min[t]) : acc[t]);
    }
}

// A panel for n_tokens tokens, in passes of up to kDecodeTokensPerPass; only the first pass
// prefetches the next panel.
template <class F, bool kL1>
void k_panel8_decode_tokens(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                            size_t x_row_bytes, size_t n_tokens, size_t n) {
    const size_t n_sb = n / kQKK;
    decode_panel_tokens_in_passes(
        y, y_stride, w, w_row_bytes, x, x_row_bytes, n_tokens, n_sb,
        [](auto&&... args) { decode_panel_in_passes(args...); },
        [&](float* y_pass, const uint8_t* rows, const uint8_t* x_pass, const uint8_t* prefetch, size_t prefetch_step,
            auto tokens) {
            k_half_panel_decode_tokens<F, kL1, decltype(tokens)::value>(y_pass, y_stride, rows, w_row_bytes, x_pass,
                                                                        x_row_bytes, n_sb, prefetch, prefetch_step);
        });
}

template <class F>
void register_k_panel8(CpuKernels& t, DType type, bool decode_prefetch_l1) {
    const size_t i = static_cast<size_t>(type);
    t.vec_dot[i] = k_panel_vec_dot<F>;
    t.gemm_tile[i] = nullptr;  // the register tiles accumulate in another order
    t.pack_panel[i] = pack_k_panel<F>;
    t.panel_act[i] = k_panel_act<F>;
    t.panel_gemm[i] = k_panel8_gemm<F>;
    t.panel_decode[i] = decode_prefetch_l1 ? k_panel8_decode<F, true> : k_panel8_decode<F, false>;
    t.panel_decode_tokens[i] = decode_prefetch_l1 ? k_panel8_decode_tokens<F, true> : k_panel8_decode_tokens<F, false>;
    t.decode_act[i] = nullptr;  // the decode reads the Q8_K blocks only
}

void register_k_panels(CpuKernels& t, bool decode_prefetch_l1) {
    register_k_panel8<Q4_KPanels>(t, DType::Q4_K, decode_prefetch_l1);
    register_k_panel8<Q5_KPanels>(t, DType::Q5_K, decode_prefetch_l1);
    register_k_panel8<Q6_KPanels>(t, DType::Q6_K, decode_prefetch_l1);
}
