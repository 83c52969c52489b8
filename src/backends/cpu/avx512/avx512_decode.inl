// One-token (decode) products of 16-row panels straight from the GGUF rows (Q4_0, Q4_1, Q5_0,
// Q8_0), for the AVX-512 VNNI table. Included inside the anonymous namespace of avx512_kernels.cpp
// after avx512_panels.inl; the contract is PanelDecodeFn in cpu_kernels.h.
//
// Same accumulation as panel_vec_dot and panel_tile (so decode, prefill and vec_dot agree bit for
// bit): lane r of a 512-bit float vector is row r, and per block, in block order,
//   acc = fma(d_w * d_x, float(isum_b), acc)      acc_min = fma(m_w, s_x, acc_min)   (Q4_1)
// with isum_b the exact int32 dot of the block. Only the way isum_b is obtained differs:
//   1. each row is read 4 blocks at a time, contiguously (2 or 3 zmm loads; masked only where a
//      plain load could leave the panel), and the quants of the 4 blocks are gathered by one word
//      permutation (vpermt2w), so that 128-bit lane i holds block i (4-bit formats: 16 quants of
//      the low, then of the high nibbles); a second one picks the block heads (d, m, qh);
//   2. one or two vpdpbusd against the 4 activation blocks, laid out the same way, leave 4 int32
//      partial sums of block i in lane i;
//   3. a transposing reduction of 16 rows (unpack + add, then a 4x4 transpose of 128-bit lanes)
//      turns 16 such vectors into 4 vectors of 16 rows, one per block; the heads go through the
//      same transpose, so the 16 rows' scales of a block are one vector (no gather: a 16-lane
//      vpgatherdd per block made Q5_0 / Q4_1 decode 1.6x slower on Zen 5);
//   4. each step prefetches a share of the next panel (Q8_0 from RAM: 22 -> 42 GB/s).

constexpr size_t kDecodeStepBlocks = 4;  // blocks of a row read per step

// vpermt2w indices: output word w takes the source word of byte
//   block_bytes * (first_block + w / words_per_block) + field_offset + 2 * ((w % words_per_block) % period)
// minus base_bytes, in the 128-byte pair of sources (two zmm).
struct WordIndex {
    alignas(64) uint16_t w[32];
};

constexpr WordIndex word_index(size_t block_bytes, size_t first_block, size_t words_per_block, size_t field_offset,
                               size_t period, size_t base_bytes) {
    WordIndex r{};
    for (size_t w = 0; w < 32; ++w) {
        const size_t byte = block_bytes * (first_block + w / words_per_block) + field_offset +
                            2 * ((w % words_per_block) % period) - base_bytes;
        r.w[w] = static_cast<uint16_t>(byte / 2);
    }
    return r;
}

// Block heads: dword 1 of 128-bit lane i = the first 32 bits of block i (d, then m for Q4_1);
// with qh_offset != 0 (Q5_0), dword 0 = the 32 bits at that offset (qh), else the head again.
constexpr WordIndex head_index(size_t block_bytes, size_t qh_offset) {
    WordIndex r{};
    for (size_t w = 0; w < 32; ++w) {
        const size_t lane = w / 8, k = w % 8;
        const size_t field = (k / 2 == 0 && qh_offset != 0) ? qh_offset : 0;
        r.w[w] = static_cast<uint16_t>((block_bytes * lane + field) / 2 + k % 2);
    }
    return r;
}

inline __m512i load_index(const WordIndex& i) { return _mm512_load_si512(i.w); }

// Masks of the 3 masked loads that read `bytes` bytes (at most 192) without touching memory past
// them; only where plain loads could leave the panel (masked loads measured far slower on Zen 5).
struct ChunkMasks {
    __mmask64 m[3];
    explicit ChunkMasks(size_t bytes) {
        for (size_t i = 0; i < 3; ++i) {
            const size_t left = bytes > 64 * i ? bytes - 64 * i : 0;
            m[i] = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
        }
    }
};

// Plain loads: the 64 * kLoads bytes from the chunk's start lie inside the caller's rows.
struct WholeChunk {};

// Where a step may read all 64 * kLoads bytes: `left` bytes remain in the row (or activations).
constexpr bool whole_chunk_fits(size_t left, int loads) { return left >= 64 * static_cast<size_t>(loads); }

// The raw bytes of up to 4 consecutive blocks: z[0] bytes 0..63, z[1] 64..127, z[2] 128..191.
struct Chunk {
    __m512i z[3];
    template <int kLoads>
    void load(const uint8_t* p, const ChunkMasks& masks) {
        for (int i = 0; i < kLoads; ++i) z[i] = _mm512_maskz_loadu_epi8(masks.m[i], p + 64 * i);
    }
    template <int kLoads>
    void load(const uint8_t* p, const WholeChunk&) {
        for (int i = 0; i < kLoads; ++i) z[i] = _mm512_loadu_si512(p + 64 * i);
    }
};

// Activation blocks b..b+3 laid out like the weights: lo/hi hold quants 0..15 / 16..31 of block i
// in 128-bit lane i; wide01/wide23 hold blocks 0,1 / 2,3 as 256-bit halves (Q8_0 weights).
template <class F>
struct DecodeActivations {
    __m512i lo, hi, wide01, wide23;
    void load(const typename F::ActBlock* xb, size_t n_blocks, size_t blocks_left) {
        constexpr size_t kBytes = sizeof(typename F::ActBlock);
        constexpr size_t kQs = offsetof(typename F::ActBlock, qs);
        static constexpr WordIndex k01 = word_index(kBytes, 0, 16, kQs, 16, 0);
        static constexpr WordIndex k23 = word_index(kBytes, 2, 16, kQs, 16, 64);
        Chunk c;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(xb);
        if (whole_chunk_fits(blocks_left * kBytes, 3)) {
            c.load<3>(p, WholeChunk{});
        } else {
            c.load<3>(p, ChunkMasks(n_blocks * kBytes));
        }
        wide01 = _mm512_permutex2var_epi16(c.z[0], load_index(k01), c.z[1]);
        wide23 = _mm512_permutex2var_epi16(c.z[1], load_index(k23), c.z[2]);
        lo = _mm512_shuffle_i32x4(wide01, wide23, 0x88);  // 128-bit lanes 0, 2 of each
        hi = _mm512_shuffle_i32x4(wide01, wide23, 0xDD);  // 128-bit lanes 1, 3 of each
    }
};

// Loads per row and step: 2 zmm for the nibble formats, 3 for Q8_0 (4 x 34 bytes).
template <class F>
constexpr int decode_loads() {
    return std::is_same<F, Q8_0Format>::value ? 3 : 2;
}

// Unsigned quants of 4 nibble blocks: 128-bit lane i = block i, low nibbles then high nibbles.
template <class F>
inline void nibble_quants(const Chunk& c, __m512i& lo, __m512i& hi) {
    constexpr size_t kBytes = sizeof(typename F::Block);
    static constexpr WordIndex kQs = word_index(kBytes, 0, 8, offsetof(typename F::Block, qs), 8, 0);
    const __m512i packed = _mm512_permutex2var_epi16(c.z[0], load_index(kQs), c.z[1]);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(packed, low4);
    hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
}

// Q5_0: sets 0x10 in the quants whose fifth bit is set (bit j of qh: element j).
// qh: 128-bit lane i holds block i's qh in bytes 0..3.
inline void add_fifth_bits(__m512i qh, __m512i& lo, __m512i& hi) {
    // byte j of a lane <- qh byte j / 8 (low half) or 2 + j / 8 (high half); then test bit j % 8
    const __m512i pick_lo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m512i pick_hi = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m512i bit = _mm512_set1_epi64(0x8040201008040201);
    const __mmask64 k_lo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, pick_lo), bit);
    const __mmask64 k_hi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, pick_hi), bit);
    const __m512i fifth = _mm512_set1_epi8(0x10);
    lo = _mm512_mask_add_epi8(lo, k_lo, lo, fifth);  // quants < 16: adding 16 sets the bit
    hi = _mm512_mask_add_epi8(hi, k_hi, hi, fifth);
}

// 4 int32 partial sums of block i's unsigned-weight dot in 128-bit lane i (offset bias not added);
// head: dword 1 of lane i = the first 32 bits of block i (see head_index).
template <class F, class Masks>
inline __m512i row_block_dots(const uint8_t* row, const Masks& masks, const DecodeActivations<F>& x, __m512i& head) {
    constexpr bool kQ5 = std::is_same<F, Q5_0Format>::value;
    static constexpr WordIndex kHead = head_index(sizeof(typename F::Block), kQ5 ? 2 : 0);
    Chunk c;
    if constexpr (std::is_same<F, Q8_0Format>::value) {
        static constexpr WordIndex k01 = word_index(sizeof(BlockQ8_0), 0, 16, offsetof(BlockQ8_0, qs), 16, 0);
        static constexpr WordIndex k23 = word_index(sizeof(BlockQ8_0), 2, 16, offsetof(BlockQ8_0, qs), 16, 64);
        c.load<decode_loads<F>()>(row, masks);
        head = _mm512_permutex2var_epi16(c.z[0], load_index(kHead), c.z[1]);
        const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));  // u = q + 128
        const __m512i u01 = _mm512_xor_si512(_mm512_permutex2var_epi16(c.z[0], load_index(k01), c.z[1]), sign);
        const __m512i u23 = _mm512_xor_si512(_mm512_permutex2var_epi16(c.z[1], load_index(k23), c.z[2]), sign);
        const __m512i d01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u01, x.wide01);
        const __m512i d23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u23, x.wide23);
        return _mm512_add_epi32(_mm512_shuffle_i32x4(d01, d23, 0x88), _mm512_shuffle_i32x4(d01, d23, 0xDD));
    } else {
        c.load<decode_loads<F>()>(row, masks);
        __m512i lo, hi;
        nibble_quants<F>(c, lo, hi);
        head = _mm512_permutex2var_epi16(c.z[0], load_index(kHead), c.z[1]);
        if constexpr (kQ5) add_fifth_bits(head, lo, hi);
        return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x.lo), hi, x.hi);
    }
}

// [a0+a2, b0+b2, a1+a3, b1+b3] per 128-bit lane
inline __m512i sum_pairs_32(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
// [sum a, sum b, sum c, sum d] per 128-bit lane, from sum_pairs_32(a, b) and sum_pairs_32(c, d)
inline __m512i sum_pairs_64(__m512i ab, __m512i cd) {
    return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

// out[i] = [u0 lane i, u1 lane i, u2 lane i, u3 lane i]: a 4x4 transpose of 128-bit lanes.
inline void transpose_lanes(__m512i* out /* [4] */, const __m512i* u /* [4] */) {
    const __m512i w0 = _mm512_shuffle_i32x4(u[0], u[1], 0x44), w1 = _mm512_shuffle_i32x4(u[2], u[3], 0x44);
    const __m512i w2 = _mm512_shuffle_i32x4(u[0], u[1], 0xEE), w3 = _mm512_shuffle_i32x4(u[2], u[3], 0xEE);
    out[0] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    out[1] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
    out[2] = _mm512_shuffle_i32x4(w2, w3, 0x88);
    out[3] = _mm512_shuffle_i32x4(w2, w3, 0xDD);
}

// dots[i]: lane r = exact unsigned-weight dot of row r's block i (i < 4), rows of w_row_bytes;
// heads[i]: lane r = the first 32 bits of row r's block i.
// u lane i: rows 0..3 of block i (the exact dots); h lane i: their block heads. Row 3 loads with
// `last_masks`, the others with `masks`.
template <class F, class Masks, class LastMasks>
inline void group_dots(__m512i& u, __m512i& h, const uint8_t* r, size_t w_row_bytes, const Masks& masks,
                       const LastMasks& last_masks, const DecodeActivations<F>& x) {
    __m512i ha, hb, hc, hd;
    const __m512i a = row_block_dots<F>(r, masks, x, ha);
    const __m512i b = row_block_dots<F>(r + w_row_bytes, masks, x, hb);
    const __m512i c = row_block_dots<F>(r + 2 * w_row_bytes, masks, x, hc);
    const __m512i d = row_block_dots<F>(r + 3 * w_row_bytes, last_masks, x, hd);
    u = sum_pairs_64(sum_pairs_32(a, b), sum_pairs_32(c, d));
    // dword 1 of each: unpacklo_epi32 -> [a0 b0 a1 b1], then the high qwords -> [a1 b1 c1 d1]
    h = _mm512_unpackhi_epi64(_mm512_unpacklo_epi32(ha, hb), _mm512_unpacklo_epi32(hc, hd));
}

// dots[i]: lane r = exact unsigned-weight dot of row r's block i (i < 4), rows of w_row_bytes;
// heads[i]: lane r = the first 32 bits of row r's block i. Rows 0..14 load with `masks`, row 15
// with `last_masks` (over-reads of the others stay inside the panel).
template <class F, class Masks, class LastMasks>
inline void panel_step_dots(__m512i* dots /* [4] */, __m512i* heads /* [4] */, const uint8_t* rows, size_t w_row_bytes,
                            const Masks& masks, const LastMasks& last_masks, const DecodeActivations<F>& x) {
    __m512i u[4], h[4];  // lane i: rows 4g..4g+3 of block i
    for (int g = 0; g < 3; ++g) group_dots<F>(u[g], h[g], rows + 4 * g * w_row_bytes, w_row_bytes, masks, masks, x);
    group_dots<F>(u[3], h[3], rows + 12 * w_row_bytes, w_row_bytes, masks, last_masks, x);
    transpose_lanes(dots, u);
    transpose_lanes(heads, h);
}

// The scaled accumulation of one step's blocks, in block order (see the header comment).
template <class F>
inline void accumulate_step(__m512& acc, __m512& acc_min, const __m512i* dots, const __m512i* heads,
                            const PanelActBlock* act, size_t nb) {
    for (size_t i = 0; i < nb; ++i) {
        const __m512i head = heads[i];  // d (and m for Q4_1) of the 16 rows
        const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(dots[i], _mm512_set1_epi32(act[i].bias)));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(act[i].d)), dot, acc);
        if constexpr (F::kHasMin) {
            const __m512 m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
            acc_min = _mm512_fmadd_ps(m, _mm512_set1_ps(act[i].s), acc_min);
        }
    }
}

// y[r] = vec_dot(row r, x) bit for bit for r < kPanelRows (see the header comment). The 16 rows
// are read as 16 interleaved streams, which the hardware prefetcher does not follow well: each
// step prefetches its share of the next panel (the rows that follow, when rows are contiguous).
template <class F>
void panel_decode(float* y, const void* w, size_t w_row_bytes, const void* x, const PanelActBlock* act, size_t n) {
    constexpr size_t kBytes = sizeof(typename F::Block);
    constexpr int kLoads = decode_loads<F>();
    const uint8_t* rows = static_cast<const uint8_t*>(w);
    const typename F::ActBlock* xb = static_cast<const typename F::ActBlock*>(x);
    const size_t n_blocks = n / kQK32;
    const size_t n_steps = (n_blocks + kDecodeStepBlocks - 1) / kDecodeStepBlocks;
    const size_t prefetch_bytes = (kPanelRows * w_row_bytes + n_steps - 1) / n_steps;
    const uint8_t* next_panel = rows + kPanelRows * w_row_bytes;
    __m512 acc = _mm512_setzero_ps(), acc_min = _mm512_setzero_ps();
    for (size_t b = 0, step = 0; b < n_blocks; b += kDecodeStepBlocks, ++step) {
        for (size_t off = step * prefetch_bytes; off < (step + 1) * prefetch_bytes; off += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(next_panel + off), _MM_HINT_T0);
        }
        const size_t nb = std::min(kDecodeStepBlocks, n_blocks - b);
        DecodeActivations<F> xa;
        xa.load(xb + b, nb, n_blocks - b);
        __m512i dots[4], heads[4];
        const uint8_t* chunk = rows + b * kBytes;
        const size_t left = (n_blocks - b) * kBytes;
        if (whole_chunk_fits(left, kLoads)) {
            panel_step_dots<F>(dots, heads, chunk, w_row_bytes, WholeChunk{}, WholeChunk{}, xa);
        } else if (whole_chunk_fits(left + w_row_bytes, kLoads)) {  // rows 0..14 may read into the next row
            panel_step_dots<F>(dots, heads, chunk, w_row_bytes, WholeChunk{}, ChunkMasks(nb * kBytes), xa);
        } else {
            const ChunkMasks masks(nb * kBytes);
            panel_step_dots<F>(dots, heads, chunk, w_row_bytes, masks, masks, xa);
        }
        accumulate_step<F>(acc, acc_min, dots, heads, act + b, nb);
    }
    _mm512_storeu_ps(y, F::kHasMin ? _mm512_add_ps(acc, acc_min) : acc);
}

// Needs the panel_act entries of register_panels (the per-block activation facts).
void register_decode_panels(CpuKernels& t) {
    t.panel_decode[static_cast<size_t>(DType::Q4_0)] = panel_decode<Q4_0Format>;
    t.panel_decode[static_cast<size_t>(DType::Q4_1)] = panel_decode<Q4_1Format>;
    t.panel_decode[static_cast<size_t>(DType::Q5_0)] = panel_decode<Q5_0Format>;
    t.panel_decode[static_cast<size_t>(DType::Q8_0)] = panel_decode<Q8_0Format>;
}
