// Dot products and register tiles of the float weight types (F16, BF16, F32) with F32 activations,
// shared by the AVX2 and AVX-512 VNNI tables (256-bit code in both). Included inside the anonymous
// namespace of avx2_kernels.cpp / avx512_kernels.cpp after x86_quant_kernels.inl (hsum_ps, h2f).
//
// Accumulation order (the same for vec_dot and every tile, so a tile equals vec_dot bit for bit):
// a row of n elements is cut into chunks of 8; chunk c is added by one FMA into accumulator
// c % kFloatChains (8 lanes); the result is hsum((acc0 + acc1) + (acc2 + acc3)), then the n % 8
// last elements one fused multiply-add each, in order. vec_dot keeps the 4 accumulators in
// registers and streams the row once (decode reads rows from memory). A tile of R rows x T tokens
// holds R * T accumulators: it runs one pass per chain (chunks k, k + 4, ...) with the weight
// vectors converted once per pass and reused by the T tokens, each activation vector loaded once
// and reused by the R rows; the 4 partial sums of each (row, token) wait on the stack.

constexpr size_t kFloatChains = 4;
// Tokens per register tile: R = kGemmTileRows (4) rows x 2 tokens = 8 accumulators, plus 4 weight
// vectors and one activation vector, fit the 16 ymm registers of AVX2.
constexpr size_t kFloatTileTokens = 2;

struct F16Weights {
    static constexpr size_t kBytes = 2;  // per element
    static __m256 load8(const uint8_t* row, size_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    }
    static float at(const uint8_t* row, size_t i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, sizeof(h));
        return h2f(h);
    }
};

struct BF16Weights {
    static constexpr size_t kBytes = 2;  // per element
    static __m256 load8(const uint8_t* row, size_t i) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float at(const uint8_t* row, size_t i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, sizeof(h));
        return bf16_to_fp32(h);
    }
};

struct F32Weights {
    static constexpr size_t kBytes = 4;  // per element
    static __m256 load8(const uint8_t* row, size_t i) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
    }
    static float at(const uint8_t* row, size_t i) {
        float v;
        std::memcpy(&v, row + 4 * i, sizeof(v));
        return v;
    }
};

// acc[p][r][t] += w(row r, chunk c + p) * x(token t, chunk c + p) for p < P with c + p < chunks
// (Full: the caller knows c + P <= chunks).
template <class W, int R, int T, int P, bool Full>
inline void float_chunks(__m256 (&acc)[P][R][T], const uint8_t* w, size_t w_row_bytes, const float* x,
                         size_t x_row_floats, size_t c, size_t chunks) {
    for (int p = 0; p < P; ++p) {
        if (!Full && c + p >= chunks) return;
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = W::load8(w + r * w_row_bytes, 8 * (c + p));
        for (int t = 0; t < T; ++t) {
            const __m256 xv = _mm256_loadu_ps(x + t * x_row_floats + 8 * (c + p));
            for (int r = 0; r < R; ++r) acc[p][r][t] = _mm256_fmadd_ps(wv[r], xv, acc[p][r][t]);
        }
    }
}

// y[t * y_stride + r] = dot(row r, token t) for r < R, t < T, in the order described above. P of
// the kFloatChains accumulators of each (row, token) live in registers at a time.
template <class W, int R, int T, int P>
void float_tile(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const float* x, size_t x_row_floats,
                size_t n) {
    static_assert(kFloatChains % P == 0, "whole passes");
    const size_t chunks = n / 8;
    __m256 part[kFloatChains][R][T];
    for (size_t pass = 0; pass < kFloatChains; pass += P) {
        __m256 acc[P][R][T];
        for (int p = 0; p < P; ++p)
            for (int r = 0; r < R; ++r)
                for (int t = 0; t < T; ++t) acc[p][r][t] = _mm256_setzero_ps();
        size_t c = pass;
        for (; c + kFloatChains <= chunks; c += kFloatChains) {
            float_chunks<W, R, T, P, true>(acc, w, w_row_bytes, x, x_row_floats, c, chunks);
        }
        if (c < chunks) float_chunks<W, R, T, P, false>(acc, w, w_row_bytes, x, x_row_floats, c, chunks);
        for (int p = 0; p < P; ++p)
            for (int r = 0; r < R; ++r)
                for (int t = 0; t < T; ++t) part[pass + p][r][t] = acc[p][r][t];
    }
    for (int r = 0; r < R; ++r) {
        const uint8_t* row = w + r * w_row_bytes;
        for (int t = 0; t < T; ++t) {
            const float* xt = x + t * x_row_floats;
            float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(part[0][r][t], part[1][r][t]),
                                              _mm256_add_ps(part[2][r][t], part[3][r][t])));
            for (size_t i = 8 * chunks; i < n; ++i) sum = std::fma(W::at(row, i), xt[i], sum);
            y[t * y_stride + r] = sum;
        }
    }
}

// Bytes past the current position of a decode row that vec_dot asks the cache for: decode streams
// the rows of large matrices (Whisper's 51,864 x 384 F16 logits, 40 MB per token) one after another,
// and the hardware prefetcher alone kept that stream near 6 GB/s of this machine's 9.
constexpr size_t kVecDotPrefetchBytes = 2048;

// The table's vec_dot: the 1 x 1 tile with all four accumulators in registers (one pass): chunk c
// into accumulator c % 4, the same FMAs in the same order as float_tile<W, 1, 1, 4>, plus a
// prefetch of the stream ahead (one cache line per four chunks of F16).
template <class W>
float float_vec_dot(const void* w, const void* x, size_t n) {
    const uint8_t* row = static_cast<const uint8_t*>(w);
    const float* xp = static_cast<const float*>(x);
    const size_t chunks = n / 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t c = 0;
    for (; c + kFloatChains <= chunks; c += kFloatChains) {
        _mm_prefetch(reinterpret_cast<const char*>(row + W::kBytes * 8 * c + kVecDotPrefetchBytes), _MM_HINT_T0);
        a0 = _mm256_fmadd_ps(W::load8(row, 8 * c), _mm256_loadu_ps(xp + 8 * c), a0);
        a1 = _mm256_fmadd_ps(W::load8(row, 8 * c + 8), _mm256_loadu_ps(xp + 8 * c + 8), a1);
        a2 = _mm256_fmadd_ps(W::load8(row, 8 * c + 16), _mm256_loadu_ps(xp + 8 * c + 16), a2);
        a3 = _mm256_fmadd_ps(W::load8(row, 8 * c + 24), _mm256_loadu_ps(xp + 8 * c + 24), a3);
    }
    if (c < chunks) a0 = _mm256_fmadd_ps(W::load8(row, 8 * c), _mm256_loadu_ps(xp + 8 * c), a0);
    if (c + 1 < chunks) a1 = _mm256_fmadd_ps(W::load8(row, 8 * c + 8), _mm256_loadu_ps(xp + 8 * c + 8), a1);
    if (c + 2 < chunks) a2 = _mm256_fmadd_ps(W::load8(row, 8 * c + 16), _mm256_loadu_ps(xp + 8 * c + 16), a2);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (size_t i = 8 * chunks; i < n; ++i) sum = std::fma(W::at(row, i), xp[i], sum);
    return sum;
}

// kGemmTileRows rows x T tokens; one token keeps two chains in registers (8 accumulators).
template <class W, int T>
void float_tile_rows(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const float* x,
                     size_t x_row_floats, size_t n) {
    constexpr int kRows = static_cast<int>(kGemmTileRows);
    float_tile<W, kRows, T, (T == 1 ? 2 : 1)>(y, y_stride, w, w_row_bytes, x, x_row_floats, n);
}

// dst [n] f32  <-  one row of W (exact: every half and bfloat16 is a float). The table's
// dequantize_row, which matmul also uses to widen tiles of rows (tile_on_f32_rows below).
template <class W>
void widen_row(float* dst, const void* src, size_t n) {
    const uint8_t* row = static_cast<const uint8_t*>(src);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, W::load8(row, i));
    for (; i < n; ++i) dst[i] = W::at(row, i);
}

// The GemmTileFn: n_tokens in 1..kGemmTileTokens, taken kFloatTileTokens at a time.
template <class W>
void float_gemm_tile(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x, size_t x_row_bytes,
                     size_t n, size_t n_tokens) {
    static_assert(kFloatTileTokens == 2, "the loop below takes one or two tokens");
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const float* xp = static_cast<const float*>(x);
    const size_t x_row_floats = x_row_bytes / sizeof(float);
    for (; n_tokens >= 2; n_tokens -= 2, y += 2 * y_stride, xp += 2 * x_row_floats) {
        float_tile_rows<W, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_floats, n);
    }
    if (n_tokens == 1) float_tile_rows<W, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_floats, n);
}

void register_float_tiles(CpuKernels& t) {
    t.vec_dot[static_cast<size_t>(DType::F16)] = float_vec_dot<F16Weights>;
    t.vec_dot[static_cast<size_t>(DType::BF16)] = float_vec_dot<BF16Weights>;
    t.vec_dot[static_cast<size_t>(DType::F32)] = float_vec_dot<F32Weights>;
    t.gemm_tile[static_cast<size_t>(DType::F16)] = float_gemm_tile<F16Weights>;
    t.gemm_tile[static_cast<size_t>(DType::BF16)] = float_gemm_tile<BF16Weights>;
    t.gemm_tile[static_cast<size_t>(DType::F32)] = float_gemm_tile<F32Weights>;
    // The F16 / BF16 tiles are the F32 tile on widened operands (the same FMAs on the same values).
    t.dequantize_row[static_cast<size_t>(DType::F16)] = widen_row<F16Weights>;
    t.dequantize_row[static_cast<size_t>(DType::BF16)] = widen_row<BF16Weights>;
    t.tile_on_f32_rows[static_cast<size_t>(DType::F16)] = true;
    t.tile_on_f32_rows[static_cast<size_t>(DType::BF16)] = true;
}
