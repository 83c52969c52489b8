// Register-tiled dot products of the 32-element weight formats (Q4_0, Q4_1, Q5_0, Q8_0) with Q8
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

struct Q5_0Format {
    using Block = BlockQ5_0;
    using ActBlock = BlockQ8_0;
    static constexpr int kOffset = 16;
    static constexpr bool kHasMin = false;
    static __m256i quants(const Block& b) {
        const __m256i fifth = _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(nibbles_to_bytes(b.qs), fifth);
    }
};

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
    __m256 d[T];  // the token's scale in every lane
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
void legacy_tile(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                 size_t x_row_bytes, size_t n) {
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
void legacy_tile_rows(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes,
                      const uint8_t* x, size_t x_row_bytes, size_t n) {
    legacy_tile<F, static_cast<int>(kGemmTileRows), T>(y, y_stride, w, w_row_bytes, x, x_row_bytes, n);
}

// The GemmTileFn: n_tokens in 1..kGemmTileTokens, taken kMaxTileTokens at a time.
template <class F>
void legacy_gemm_tile(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                      size_t x_row_bytes, size_t n, size_t n_tokens) {
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens > 0) {
        const size_t t = std::min<size_t>(n_tokens, kMaxTileTokens);
        switch (t) {
            case 1: legacy_tile_rows<F, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            case 2: legacy_tile_rows<F, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            case 3: legacy_tile_rows<F, (kMaxTileTokens >= 3 ? 3 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            default: legacy_tile_rows<F, (kMaxTileTokens >= 4 ? 4 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
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
    t.vec_dot[static_cast<size_t>(DType::Q8_0)] = legacy_vec_dot<Q8_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_0)] = legacy_gemm_tile<Q4_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_1)] = legacy_gemm_tile<Q4_1Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q5_0)] = legacy_gemm_tile<Q5_0Format>;
    t.gemm_tile[static_cast<size_t>(DType::Q8_0)] = legacy_gemm_tile<Q8_0Format>;
}

// ---- K-quants (Q4_K, Q6_K) with Q8_K activations -------------------------------------------------
// A super-block of 256 is 8 chunks of 32 quants. Per chunk: maddubs(q, x) gives int16 pair sums
// (no saturation: q <= 63, |x| <= 127), then madd with the chunk's int16 scales gives int32 lanes.
// Q6_K's -32 offset is the per-token term maddubs(32, x), shared by all rows. The float part per
// super-block is the reference's: d_x * d_w * sum - d_x * dmin_w * (mins . bsums).

struct Q4_KFormat {
    using Block = BlockQ4_K;
    static constexpr bool kOffset32 = false;
    struct Row {
        const Block* b;
        uint32_t scales_mins[4];  // bytes 0..7 scales, 8..15 mins
        void load(const Block* block) {
            b = block;
            unpack_k_scales(block->scales, scales_mins);
        }
        __m256i quants(int c) const {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * (c / 2)));
            return _mm256_and_si256(c & 1 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0x0F));
        }
        __m256i scales16(int c) const {
            return _mm256_set1_epi16(reinterpret_cast<const uint8_t*>(scales_mins)[c]);
        }
        float finish(const BlockQ8_K& x, int isum) const {
            const float d = x.d * h2f(b->d);
            const float dmin = x.d * h2f(b->dmin);
            return d * static_cast<float>(isum) - dmin * static_cast<float>(k_mins_dot(scales_mins, x.bsums));
        }
    };
};

struct Q6_KFormat {
    using Block = BlockQ6_K;
    static constexpr bool kOffset32 = true;
    struct Row {
        const Block* b;
        void load(const Block* block) { b = block; }
        __m256i quants(int c) const {
            const int half = c / 4, k = c % 4;
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * half + 32 * (k & 1)));
            const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * half));
            const __m256i low4 = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(lo, 4) : lo, _mm256_set1_epi8(0x0F));
            const __m256i high2 = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * k), _mm256_set1_epi8(3));
            return _mm256_or_si256(low4, _mm256_slli_epi16(high2, 4));
        }
        __m256i scales16(int c) const { return two_scales(b->scales[2 * c], b->scales[2 * c + 1]); }
        float finish(const BlockQ8_K& x, int isum) const { return x.d * h2f(b->d) * static_cast<float>(isum); }
    };
};

template <class F, int R, int T>
void k_tile(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
            size_t x_row_bytes, size_t n) {
    float sum[R][T] = {};
    for (size_t sb = 0; sb < n / kQKK; ++sb) {
        const BlockQ8_K* xb[T];
        for (int t = 0; t < T; ++t) xb[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + sb;
        typename F::Row rows[R];
        for (int r = 0; r < R; ++r) rows[r].load(reinterpret_cast<const typename F::Block*>(w + r * w_row_bytes) + sb);
        __m256i acc[R][T];
        for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_si256();
        }
        for (int c = 0; c < 8; ++c) {
            __m256i xc[T], off[T];
            for (int t = 0; t < T; ++t) {
                xc[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t]->qs + 32 * c));
                off[t] = F::kOffset32 ? _mm256_maddubs_epi16(_mm256_set1_epi8(32), xc[t]) : _mm256_setzero_si256();
            }
            for (int r = 0; r < R; ++r) {
                const __m256i q = rows[r].quants(c);
                const __m256i s16 = rows[r].scales16(c);
                for (int t = 0; t < T; ++t) {
                    __m256i pairs = _mm256_maddubs_epi16(q, xc[t]);
                    if constexpr (F::kOffset32) pairs = _mm256_sub_epi16(pairs, off[t]);
                    acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(s16, pairs));
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) sum[r][t] += rows[r].finish(*xb[t], hsum_epi32(acc[r][t]));
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) y[t * y_stride + r] = sum[r][t];
    }
}

template <class F>
float k_vec_dot(const void* w, const void* x, size_t n) {
    float y;
    k_tile<F, 1, 1>(&y, 1, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, n);
    return y;
}

template <class F>
void k_gemm_tile(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                 size_t x_row_bytes, size_t n, size_t n_tokens) {
    constexpr int R = static_cast<int>(kGemmTileRows);
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens > 0) {
        const size_t t = std::min<size_t>(n_tokens, kMaxTileTokens);
        switch (t) {
            case 1: k_tile<F, R, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            case 2: k_tile<F, R, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            case 3: k_tile<F, R, (kMaxTileTokens >= 3 ? 3 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
            default: k_tile<F, R, (kMaxTileTokens >= 4 ? 4 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n); break;
        }
        y += t * y_stride;
        xp += t * x_row_bytes;
        n_tokens -= t;
    }
}

void register_k_tiles(CpuKernels& t) {
    t.vec_dot[static_cast<size_t>(DType::Q4_K)] = k_vec_dot<Q4_KFormat>;
    t.vec_dot[static_cast<size_t>(DType::Q6_K)] = k_vec_dot<Q6_KFormat>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_K)] = k_gemm_tile<Q4_KFormat>;
    t.gemm_tile[static_cast<size_t>(DType::Q6_K)] = k_gemm_tile<Q6_KFormat>;
}
