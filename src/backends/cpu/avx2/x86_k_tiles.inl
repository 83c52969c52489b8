// Register-tiled dot products of the K-quant formats (Q4_K, Q6_K) with Q8_K activations, shared by
// the AVX2 and AVX-512 VNNI tables. Included inside the anonymous namespace of avx2_kernels.cpp /
// avx512_kernels.cpp after x86_gemm_tiles.inl (kMaxTileTokens).

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
        __m256i scales16(int c) const { return _mm256_set1_epi16(reinterpret_cast<const uint8_t*>(scales_mins)[c]); }
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
void k_tile(float* y, size_t y_stride, const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes,
            size_t n) {
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
void k_gemm_tile(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x, size_t x_row_bytes,
                 size_t n, size_t n_tokens) {
    constexpr int R = static_cast<int>(kGemmTileRows);
    const uint8_t* wp = static_cast<const uint8_t*>(w);
    const uint8_t* xp = static_cast<const uint8_t*>(x);
    while (n_tokens > 0) {
        const size_t t = std::min<size_t>(n_tokens, kMaxTileTokens);
        switch (t) {
            case 1:
                k_tile<F, R, 1>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            case 2:
                k_tile<F, R, 2>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            case 3:
                k_tile<F, R, (kMaxTileTokens >= 3 ? 3 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
            default:
                k_tile<F, R, (kMaxTileTokens >= 4 ? 4 : 1)>(y, y_stride, wp, w_row_bytes, xp, x_row_bytes, n);
                break;
        }
        y += t * y_stride;
        xp += t * x_row_bytes;
        n_tokens -= t;
    }
}

[[maybe_unused]] void register_k_tiles(CpuKernels& t) {  // the AVX-512 table has its own
    t.vec_dot[static_cast<size_t>(DType::Q4_K)] = k_vec_dot<Q4_KFormat>;
    t.vec_dot[static_cast<size_t>(DType::Q6_K)] = k_vec_dot<Q6_KFormat>;
    t.gemm_tile[static_cast<size_t>(DType::Q4_K)] = k_gemm_tile<Q4_KFormat>;
    t.gemm_tile[static_cast<size_t>(DType::Q6_K)] = k_gemm_tile<Q6_KFormat>;
}
