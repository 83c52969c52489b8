// x86 SIMD kernels shared by the AVX2 and AVX-512 VNNI tables. This file is included inside an
// anonymous namespace of avx2_kernels.cpp and avx512_kernels.cpp, each compiled with its own ISA
// flags, after that file defines the one primitive that differs:
//   __m256i dot_u8_s8(__m256i acc, __m256i a_u8, __m256i b_s8)
//     acc[i] + sum over 4 adjacent byte pairs of a (unsigned) * b (signed), as 8 int32.
// Layouts: src/ops/quant_blocks.h. Each kernel is tested against the scalar reference.

// ---- helpers -------------------------------------------------------------------------------------

// Hardware half conversions (F16C), bit-identical to fp16_to_fp32 / fp32_to_fp16 (round to
// nearest even), without the call into the portable versions.
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f2h(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// 16 bytes of nibbles -> 32 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31.
inline __m256i nibbles_to_bytes(const uint8_t* qs) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes of 0xFF (bit set) or 0x00.
inline __m256i bits_to_bytes(const uint8_t* bits) {
    uint32_t x32;
    std::memcpy(&x32, bits, sizeof(x32));
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)),
                            _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i probe = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(probe, _mm256_set1_epi64x(-1));
}

// sum of signed x * signed y per 4 bytes (|y| <= 127), as 8 int32
inline __m256i dot_s8_s8(__m256i x, __m256i y) {
    return dot_u8_s8(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

inline __m256 half_product(uint16_t a, uint16_t b) { return _mm256_set1_ps(h2f(a) * h2f(b)); }

// ---- 32-element formats: x86_gemm_tiles.inl ---------------------------------------------------

// ---- K-quants ------------------------------------------------------------------------------------

// Q4_K / Q5_K packed scales -> bytes 0..7 scales, bytes 8..15 mins.
inline void unpack_k_scales(const uint8_t* packed, uint32_t* out /* [4] */) {
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    std::memcpy(out, packed, kKScaleBytes);
    out[3] = ((out[2] >> 4) & kLow4) | (((out[1] >> 6) & kLow2) << 4);
    const uint32_t mins_low = out[1] & kLow6;
    out[1] = (out[2] & kLow4) | (((out[0] >> 6) & kLow2) << 4);
    out[2] = mins_low;
    out[0] &= kLow6;
}

// unpack_k_scales in vector registers (no round trip through memory): 12 packed bytes = words u0, u1,
// u2 -> words (u0 & 0x3f.., (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4, u1 & 0x3f..,
// ((u2 >> 4) & 0x0f..) | ((u1 >> 6) & 0x03..) << 4), per 128-bit lane: one vpshufb gathers the low
// parts (u0, u2, u1, u2), another the sources of the high bits (0, u0, 0, u1), whose bits 6 and 7
// a 2-bit shift of the dword moves to 4 and 5 (the bits it moves in from the next byte are masked
// off): 7 instructions per lane.
inline __m256i unpack_k_scale_words(__m256i words) {
    const __m256i low_parts =
        _mm256_shuffle_epi8(words, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 8,
                                                    9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i high_sources =
        _mm256_shuffle_epi8(words, _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1,
                                                    -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(low_parts, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                         _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f,
                                                           0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi32(high_sources, 2), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(low, high);
}

// Bytes 0..7 scale_0..7, bytes 8..15 min_0..7 of a Q4_K / Q5_K super-block. Reads 16 bytes: the 12
// scale bytes of a block are followed by the block's quants.
inline __m128i unpack_k_scales_sse(const uint8_t* packed) {
    const __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
    return _mm256_castsi256_si128(unpack_k_scale_words(_mm256_castsi128_si256(words)));
}

// unpack_k_scales_sse of two super-blocks at once: a's 16 bytes in the low 128 bits, b's in the high.
inline __m256i unpack_k_scales_pair(const uint8_t* packed_a, const uint8_t* packed_b) {
    return unpack_k_scale_words(_mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed_b)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed_a))));
}

// ---- 8 rows at a time (the one-token decode kernels of both tables) -----------------------------

constexpr size_t kDecodeRows = 8;  // rows per pass of a decode kernel (lane r of a ymm = row r)

// v[r] = (4 lanes of A_r | 4 lanes of B_r)  ->  *a: lane r = sum of A_r, *b: lane r = sum of B_r.
inline void sum_halves_of_8(const __m256i* v, __m256i* a, __m256i* b) {
    const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
    const __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
    const __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i rows0123 = _mm256_hadd_epi32(h01, h23);  // [A of rows 0..3 | B of rows 0..3]
    const __m256i rows4567 = _mm256_hadd_epi32(h45, h67);
    *a = _mm256_permute2x128_si256(rows0123, rows4567, 0x20);
    *b = _mm256_permute2x128_si256(rows0123, rows4567, 0x31);
}

// v[r]: 8 int32 lanes of row r  ->  lane r = the sum of v[r]'s lanes (the sum of both halves).
inline __m256i sum_lanes_of_8(const __m256i* v) {
    __m256i a, b;
    sum_halves_of_8(v, &a, &b);
    return _mm256_add_epi32(a, b);
}

// The f16 field at byte `offset` of block b of 8 rows, as 8 floats (lane r = row r).
inline __m256 half_field_of_8_rows(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, size_t offset) {
    uint16_t h[8];
    for (size_t r = 0; r < 8; ++r) std::memcpy(&h[r], rows + r * w_row_bytes + block_byte + offset, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(h[0]), static_cast<short>(h[1]), static_cast<short>(h[2]),
                                          static_cast<short>(h[3]), static_cast<short>(h[4]), static_cast<short>(h[5]),
                                          static_cast<short>(h[6]), static_cast<short>(h[7])));
}

// The two adjacent f16 fields at bytes `offset` and offset + 2 of block b of 8 rows (Q4_K d and
// dmin, Q4_1 d and m), lane r = row r: one 32-bit load per row instead of two 16-bit ones, and one
// shuffle to part them.
inline void half_field_pair_of_8_rows(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, size_t offset,
                                      __m256* first, __m256* second) {
    int32_t w[8];
    for (size_t r = 0; r < 8; ++r) std::memcpy(&w[r], rows + r * w_row_bytes + block_byte + offset, 4);
    const __m256i both = _mm256_setr_epi32(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
    // per 128-bit half: the 4 first fields, then the 4 second fields
    const __m256i parted =
        _mm256_shuffle_epi8(both, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8,
                                                   9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    const __m256i ordered = _mm256_permute4x64_epi64(parted, _MM_SHUFFLE(3, 1, 2, 0));  // [firsts | seconds]
    *first = _mm256_cvtph_ps(_mm256_castsi256_si128(ordered));
    *second = _mm256_cvtph_ps(_mm256_extracti128_si256(ordered, 1));
}

// The float step of the K-quant decodes (both tables) for one super-block of 8 rows:
// acc += d_w * d_x * isum and, with mins, acc_min += dmin_w * d_x * mdot.
template <class Block, bool kHasMins>
inline void k_decode_scale_step(const uint8_t* rows, size_t w_row_bytes, size_t block_byte, __m256 dx, __m256i isum,
                                __m256i mdot, __m256* acc, __m256* acc_min) {
    if constexpr (kHasMins) {
        static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2, "d and dmin adjacent");
        __m256 dw, dmin;
        half_field_pair_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, d), &dw, &dmin);
        *acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), *acc);
        *acc_min = _mm256_fmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mdot), *acc_min);
    } else {
        const __m256 dw = half_field_of_8_rows(rows, w_row_bytes, block_byte, offsetof(Block, d));
        *acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), *acc);
    }
}

// The decode kernels prefetch the next panel of rows while they multiply the current one: into L1
// (_MM_HINT_T0) or into L2 (_MM_HINT_T1), whichever CpuFeatures::decode_prefetch_l1 says is faster
// on this CPU (Zen 4 and Sapphire Rapids: L2; Zen 5: L1; `matmul_bench ... --vs-read` shows it).
template <bool kIntoL1>
inline void prefetch_bytes(const uint8_t* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) {
        if constexpr (kIntoL1) {
            _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
        } else {
            _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T1);
        }
    }
}

// One token times a panel of kPanelRows rows, in passes of kDecodeRows rows over its n_steps block
// steps: pass(y, first row, prefetch, prefetch_step). Each step of a pass prefetches prefetch_step
// bytes from `ahead` bytes past the panel's start on: over all the passes' steps, `ahead` bytes
// ahead of the reads when the panel is one sequential run read in order (the _X8 layouts).
template <class Pass>
void decode_passes_prefetching(float* y, const uint8_t* rows, size_t w_row_bytes, size_t n_steps, size_t ahead,
                               Pass pass) {
    const size_t steps = (kPanelRows / kDecodeRows) * n_steps;
    const size_t prefetch_step = ((kPanelRows * w_row_bytes + steps - 1) / steps + 63) / 64 * 64;
    for (size_t h = 0; h < kPanelRows / kDecodeRows; ++h) {
        pass(y + kDecodeRows * h, rows + kDecodeRows * h * w_row_bytes, rows + ahead + h * n_steps * prefetch_step,
             prefetch_step);
    }
}

// GGUF rows: the passes read them as 8 interleaved streams, which the hardware prefetcher does not
// follow well from memory, so the steps prefetch the next panel, once, as one sequential stream.
template <class Pass>
void decode_panel_in_passes(float* y, const uint8_t* rows, size_t w_row_bytes, size_t n_steps, Pass pass) {
    decode_passes_prefetching(y, rows, w_row_bytes, n_steps, kPanelRows * w_row_bytes, pass);
}

// The _X8 layouts (a panel is two groups, each one sequential run read in order): into L1, a fixed
// kGroupsPrefetchAheadL1 ahead of the reads, not a whole panel. A panel of wide rows is larger than
// L1 (Q4_K_X8 rows of 8960: 80 KiB, L1 48 KiB on Zen 5), and its lines leave L1 before they are
// read. `matmul_bench --vs-read`, Zen 5, one thread, 8960 x 1536 from memory, product / plain read:
// Q4_K_X8 0.93 a panel ahead, 0.97-0.98 at 8-12 KiB, 0.97 at 16, 0.93-0.94 at 24; Q6_K_X8 0.92 ->
// 0.95-0.97 at 12-16 KiB. Into L2 (CPUs where that hint is faster) a panel ahead.
constexpr size_t kGroupsPrefetchAheadL1 = 12 * 1024;

template <bool kIntoL1, class Pass>
void decode_groups_in_passes(float* y, const uint8_t* groups, size_t w_row_bytes, size_t n_steps, Pass pass) {
    const size_t panel_bytes = kPanelRows * w_row_bytes;
    const size_t ahead = kIntoL1 ? std::min(panel_bytes, kGroupsPrefetchAheadL1) : panel_bytes;
    decode_passes_prefetching(y, groups, w_row_bytes, n_steps, ahead, pass);
}

// Several tokens over one group of rows: passes of up to kDecodeTokensPerPass tokens,
// pass(first token, std::integral_constant<int, T>). The first pass reads the group from memory;
// the later ones find it in L1 or L2.
constexpr size_t kDecodeTokensPerPass = 8;

template <int T, class Pass>
void token_pass(size_t t, size_t count, Pass& pass) {
    if constexpr (T > 1) {
        if (count < T) {
            token_pass<T - 1>(t, count, pass);
            return;
        }
    }
    pass(t, std::integral_constant<int, T>{});
}

template <class Pass>
void in_token_passes(size_t n_tokens, Pass pass) {
    for (size_t t = 0; t < n_tokens; t += kDecodeTokensPerPass) {
        token_pass<kDecodeTokensPerPass>(t, std::min(kDecodeTokensPerPass, n_tokens - t), pass);
    }
}

// Several tokens times a panel (tokens: rows of x_row_bytes from x; y: rows of y_stride): each row
// pass of row_passes (decode_panel_in_passes or decode_groups_in_passes, called as
// row_passes(y, w, w_row_bytes, n_steps, pass)) in token passes; only the first token pass
// prefetches the next panel. rows_tokens(y, rows, x, prefetch, prefetch_step, tokens) decodes
// tokens::value tokens over the pass's kDecodeRows rows.
template <class RowPasses, class RowsTokens>
void decode_panel_tokens_in_passes(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                                   size_t x_row_bytes, size_t n_tokens, size_t n_steps, RowPasses row_passes,
                                   RowsTokens rows_tokens) {
    const uint8_t* xq = static_cast<const uint8_t*>(x);
    row_passes(y, static_cast<const uint8_t*>(w), w_row_bytes, n_steps,
               [&](float* y_pass, const uint8_t* rows, const uint8_t* prefetch, size_t prefetch_step) {
                   in_token_passes(n_tokens, [&](size_t t0, auto tokens) {
                       rows_tokens(y_pass + t0 * y_stride, rows, xq + t0 * x_row_bytes, prefetch,
                                   t0 == 0 ? prefetch_step : 0, tokens);
                   });
               });
}

// Hides a pointer's value from the optimizer (no instruction): reads through it then stay inside
// the loop that makes them instead of being hoisted into registers the loop needs (see KToken).
template <class T>
inline const T* opaque(const T* p) {
    asm("" : "+r"(p));
    return p;
}

// (Q4_K, Q5_K, Q6_K: avx2_k_panels.inl, for the AVX2 and AVX-512 tables)

// ---- float weights: x86_float_tiles.inl ---------------------------------------------------------

// ---- activation quantizers (bit-exact with the references) ---------------------------------------

// roundf: nearest, ties away from zero
inline __m256 round_half_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 is_half_or_more = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_add_ps(t, _mm256_and_ps(is_half_or_more, step));
}

// Four vectors of 8 int32 (each in int8 range) -> 32 int8 in order.
inline void store_i8(int8_t* dst, __m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), ordered);
}

// One block of 32 as in quantize_row_q8_0_ref; returns sum(qs) and the unrounded scale.
inline int quantize_block_q8(const float* x, int8_t* qs, float* d_out) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, abs_ps(v[k]));
    }
    const float d = hmax_ps(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
    store_i8(qs, q[0], q[1], q[2], q[3]);
    *d_out = d;
    return hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

void quantize_row_q8_0(void* dst, const float* src, size_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i) {
        float d;
        quantize_block_q8(src + i * kQK32, b[i].qs, &d);
        b[i].d = f2h(d);
    }
}

void quantize_row_q8_1(void* dst, const float* src, size_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i) {
        float d;
        const int sum = quantize_block_q8(src + i * kQK32, b[i].qs, &d);
        b[i].d = f2h(d);
        b[i].s = f2h(static_cast<float>(sum) * d);
    }
}

// As quantize_row_q8_K_ref: the scale comes from the first element of largest magnitude.
void quantize_row_q8_k(void* dst, const float* src, size_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        __m256 amax_v = _mm256_setzero_ps();
        for (size_t j = 0; j < kQKK; j += 8) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(src + j)));
        const float amax = hmax_ps(amax_v);
        if (amax == 0.0f) {
            std::memset(&b[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        size_t first = 0;
        while (std::fabs(src[first]) != amax) ++first;
        const __m256 iscale = _mm256_set1_ps(-127.0f / src[first]);
        for (size_t j = 0; j < kQKK; j += 32) {
            __m256i q[4];
            for (size_t k = 0; k < 4; ++k) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + j + 8 * k), iscale);
                q[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                    _mm256_set1_epi32(127));
            }
            store_i8(b[i].qs + j, q[0], q[1], q[2], q[3]);
            b[i].bsums[j / 16] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
            b[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
        }
        b[i].d = 1.0f / (-127.0f / src[first]);
    }
}
