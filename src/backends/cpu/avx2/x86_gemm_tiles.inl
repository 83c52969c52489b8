// Register-tiled dot products of the 32-element weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with Q8
// activations, shared by the AVX2 and AVX-512 VNNI tables. Included inside the anonymous namespace
// of avx2_kernels.cpp / avx512_kernels.cpp after x86_quant_kernels.inl and after these constants:
//   kExactU8Dot     dot_u8_s8 never saturates (vpdpbusd), so u8 operands may reach 255
//   kMaxTileTokens  tokens per register tile (limited by the vector register count)
//
// A tile holds R weight rows x T tokens of 8-lane float accumulators. Each weight block is unpacked
// once and reused by the T tokens; each activation block is loaded once and reused by the R rows.
// Quants are handled as unsigned u with w = d * (u - kOffset) (+ m): the offset becomes a per-token
// integer bias, -kOffset * (sums of 4 activation bytes), which seeds the u8 x s8 dot product, so the
// int32 lanes equal those of the signed dot product exactly. vec_dot is the 1 x 1 tile, so the
// matrix product of any token count equals the row-by-row dot products bit for bit.

struct Q4_0Format {
    using Block = BlockQ4_0;
    using ActBlock = BlockQ8_0;
    static constexpr int kOffset = 8;
    static constexpr bool kHasMin = false;
    static __m256i quants(const Block& b) { return nibbles_to_bytes(b.qs); }
};

struct Q4_1Format {
    using Block = BlockQ4_1;
    using ActBlock = BlockQ8_1;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = true;
    static __m256i quants(const Block& b) { return nibbles_to_bytes(b.qs); }
};

// The 32 five-bit quants of a Q5_0 or Q5_1 block: nibbles plus bit j of qh as bit 4 of quant j.
template <class Block>
inline __m256i five_bit_quants(const Block& b) {
    const __m256i fifth = _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles_to_bytes(b.qs), fifth);
}

struct Q5_0Format {
    using Block = BlockQ5_0;
    using ActBlock = BlockQ8_0;
    static constexpr int kOffset = 16;
    static constexpr bool kHasMin = false;
    static __m256i quants(const Block& b) { return five_bit_quants(b); }
};

struct Q5_1Format {
    using Block = BlockQ5_1;
    using ActBlock = BlockQ8_1;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = true;
    static __m256i quants(const Block& b) { return five_bit_quants(b); }
};

// Formats of five-bit quants (their int16 pair sums are twice those of four-bit quants).
template <class F>
constexpr bool five_bit_format() {
    return std::is_same<F, Q5_0Format>::value || std::is_same<F, Q5_1Format>::value;
}

// Signed bytes seen as u = q + 128 where the u8 dot product is exact; otherwise the sign trick.
struct Q8_0Format {
    using Block = BlockQ8_0;
    using ActBlock = BlockQ8_0;
    static constexpr int kOffset = kExactU8Dot ? 128 : 0;
    static constexpr bool kHasMin = false;
    static constexpr bool kSigned = !kExactU8Dot;
    static __m256i quants(const Block& b) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
        return kExactU8Dot ? _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))) : q;
    }
};

template <class F>
constexpr bool signed_quants() {
    if constexpr (std::is_same<F, Q8_0Format>::value) return F::kSigned;
    return false;
}

// The T tokens' view of activation block b: quants, scales, offset biases and (Q8_1) sums.
template <class F, int T>
struct ActivationBlocks {
    __m256i q[T];
    __m256i bias[T];
    __m256 d[T];                  // the token's scale in every lane
    __m128 s = _mm_setzero_ps();  // lane t: d * sum(q) of token t (formats with a min)

    void load(const uint8_t* x, size_t x_row_bytes, size_t b) {
        float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int t = 0; t < T; ++t) {
            const typename F::ActBlock& xb = reinterpret_cast<const typename F::ActBlock*>(x + t * x_row_bytes)[b];
            q[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
            d[t] = _mm256_set1_ps(h2f(xb.d));
            if constexpr (F::kOffset != 0) {
                const __m256i off = _mm256_set1_epi8(static_cast<char>(F::kOffset));
                bias[t] = _mm256_sub_epi32(_mm256_setzero_si256(), dot_u8_s8(_mm256_setzero_si256(), off, q[t]));
            } else {
                bias[t] = _mm256_setzero_si256();
            }
            if constexpr (F::kHasMin) sums[t] = h2f(xb.s);
        }
        // built in registers: a vector load of scalars just stored would stall store forwarding
        if constexpr (F::kHasMin) s = _mm_setr_ps(sums[0], sums[1], sums[2], sums[3]);
    }
};

// Int32 lanes of the dot product of one weight block's quants with one token's activations.
template <class F>
inline __m256i block_dot(__m256i u, __m256i xq, __m256i bias) {
    if constexpr (signed_quants<F>()) return dot_s8_s8(u, xq);
    return dot_u8_s8(bias, u, xq);
}

template <class F, int R, int T>
void legacy_tile(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes,
                 size_t n) {
    __m256 acc[R][T];
    __m128 mins[R];
    for (int r = 0; r < R; ++r) {
        mins[r] = _mm_setzero_ps();
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    ActivationBlocks<F, T> act;
    for (size_t b = 0; b < n / kQK32; ++b) {
        act.load(x, x_row_bytes, b);
        for (int r = 0; r < R; ++r) {
            const typename F::Block& wb = reinterpret_cast<const typename F::Block*>(w + r * w_row_bytes)[b];
            const __m256i u = F::quants(wb);
            const __m256 dw = _mm256_set1_ps(h2f(wb.d));
            for (int t = 0; t < T; ++t) {
                const __m256 dot = _mm256_cvtepi32_ps(block_dot<F>(u, act.q[t], act.bias[t]));
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, act.d[t]), dot, acc[r][t]);
            }
            if constexpr (F::kHasMin) mins[r] = _mm_fmadd_ps(_mm_set1_ps(h2f(wb.m)), act.s, mins[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        alignas(16) float m[4];
        _mm_store_ps(m, mins[r]);
        for (int t = 0; t < T; ++t) y[t * y_stride + r] = hsum_ps(acc[r][t]) + (F::kHasMin ? m[t] : 0.0f);
    }
}

template <class F>
float legacy_vec_dot(const void* w, const void* x, size_t n) {
    float y;
    legacy_tile<F, 1, 1>(&y, 1, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n);
    return y;
}

template <class F, int T>
void legacy_tile_rows(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, size_t n) {
    legacy_tile<F, static_cast<int>(kGemmTileRows), T>(y, y_stride, w, w_row_bytes, x, x_row_bytes, n);
}

// The GemmTileFn: n_tokens in 1..kGemmTileTokens, taken kMaxTileTokens at a time.
template <class F>
void legacy_gemm_tile(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x, size_t x_row_bytes,
                      size_t n, size_t n_tokens) {
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens > 0) {
        const size_t t = std::min<size_t>(n_tokens, kMaxTileTokens);
        switch (t) {
            case 1:
                legacy_tile_rows<F, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            case 2:
                legacy_tile_rows<F, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            case 3:
                legacy_tile_rows<F, (kMaxTileTokens >= 3 ? 3 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            default:
                legacy_tile_rows<F, (kMaxTileTokens >= 4 ? 4 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
        }
        y += t * y_stride;
        xp += t * x_row_bytes;
        n_tokens -= t;
    }
}

void register_legacy_tiles(CpuKernels& t) {
    t.vec_dot[static_cast<size_t>(DType::Q4_0)] = legacy_vec_dot<Q4_0Format>;
    t.vec_dot[static_cast<size_t>(DType::Q4_1)] = legacy_vec_dot<Q4_1Format>;
    t.vec_dot[static_cast<size_t>(DType::Q5_0)] = legacy_vec_dot<Q5_0Format>;
    t.vec_dot[static_cast<size_t>(DType::Q5_1)] = legacy_vec_dot<Q5_1Format>;
    t.vec_dot[static_cast<size_t>(DType::Q8_0)] = legacy_vec_dot<Q8_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_0)] = legacy_gemm_tile<Q4_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_1)] = legacy_gemm_tile<Q4_1Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q5_0)] = legacy_gemm_tile<Q5_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q5_1)] = legacy_gemm_tile<Q5_1Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q8_0)] = legacy_gemm_tile<Q8_0Format>;
}
