// AVX2 + FMA micro-kernel of dense_gemm (see dense_gemm.h): R rows of A (1..6) times one packed
// panel of 16 columns. 2R ymm accumulators (12 at R = 6), two panel loads and R broadcasts per k;
// each C element is one FMA chain in k order, as the generic kernel's std::fma loop.
//
// The accumulators are named variables, not an array: GCC 12 kept an `__m256 acc[R][2]` array on
// the stack and stored all 12 of them back every k (12 GFLOP/s instead of 25 on this Zen 1 core).
#include <immintrin.h>

#include "backends/cpu/dense_gemm.h"

namespace cactus {

namespace {

// Row r of the tile: c<r>0 / c<r>1 hold columns 0-7 / 8-15.
#define CACTUS_DENSE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

template <int R>
void panel_rows_t(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, bool accumulate) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
    __m256 c30 = zero, c31 = zero, c40 = zero, c41 = zero, c50 = zero, c51 = zero;
#define CACTUS_DENSE_LOAD(r)                        \
    if constexpr (R > r) {                          \
        c##r##0 = _mm256_loadu_ps(c + (r)*ldc);     \
        c##r##1 = _mm256_loadu_ps(c + (r)*ldc + 8); \
    }
    if (accumulate) {
        CACTUS_DENSE_ROWS(CACTUS_DENSE_LOAD)
    }
#undef CACTUS_DENSE_LOAD
    for (size_t kk = 0; kk < k; ++kk) {
        const __m256 b0 = _mm256_loadu_ps(panel + kk * kDensePanel);
        const __m256 b1 = _mm256_loadu_ps(panel + kk * kDensePanel + 8);
        const float* ak = a + kk;
#define CACTUS_DENSE_FMA(r)                                 \
    if constexpr (R > r) {                                  \
        const __m256 x = _mm256_broadcast_ss(ak + (r)*lda); \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);          \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);          \
    }
        CACTUS_DENSE_ROWS(CACTUS_DENSE_FMA)
#undef CACTUS_DENSE_FMA
    }
#define CACTUS_DENSE_STORE(r)                       \
    if constexpr (R > r) {                          \
        _mm256_storeu_ps(c + (r)*ldc, c##r##0);     \
        _mm256_storeu_ps(c + (r)*ldc + 8, c##r##1); \
    }
    CACTUS_DENSE_ROWS(CACTUS_DENSE_STORE)
#undef CACTUS_DENSE_STORE
}

#undef CACTUS_DENSE_ROWS

void panel_rows_avx2(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows,
                     bool accumulate) {
    switch (rows) {
        case 1:
            return panel_rows_t<1>(c, ldc, a, lda, panel, k, accumulate);
        case 2:
            return panel_rows_t<2>(c, ldc, a, lda, panel, k, accumulate);
        case 3:
            return panel_rows_t<3>(c, ldc, a, lda, panel, k, accumulate);
        case 4:
            return panel_rows_t<4>(c, ldc, a, lda, panel, k, accumulate);
        case 5:
            return panel_rows_t<5>(c, ldc, a, lda, panel, k, accumulate);
        default:
            return panel_rows_t<6>(c, ldc, a, lda, panel, k, accumulate);
    }
}

float hsum256(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

// Four rows at a time: four accumulators, one horizontal reduction for all four.
void dot4_rows(float* s, const float* q, const float* r, size_t stride, size_t d) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + c), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + stride + c), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + 2 * stride + c), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + 3 * stride + c), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));  // [r0 r1 r2 r3 | same]
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    float out[4];
    _mm_storeu_ps(out, sum);
    for (; c < d; ++c)
        for (size_t i = 0; i < 4; ++i) out[i] += q[c] * r[i * stride + c];
    for (size_t i = 0; i < 4; ++i) s[i] = out[i];
}

void dot_rows_avx2(float* s, const float* q, const float* rows, size_t stride, size_t n_rows, size_t d) {
    size_t j = 0;
    for (; j + 4 <= n_rows; j += 4) dot4_rows(s + j, q, rows + j * stride, stride, d);
    for (; j < n_rows; ++j) {
        const float* r = rows + j * stride;
        __m256 a = _mm256_setzero_ps();
        size_t c = 0;
        for (; c + 8 <= d; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(r + c), a);
        float dot = hsum256(a);
        for (; c < d; ++c) dot += q[c] * r[c];
        s[j] = dot;
    }
}

// Up to 64 columns in eight accumulators over all rows (W: whole vectors in this block).
template <int W>
void axpy_block(float* out, const float* p, const float* rows, size_t stride, size_t n_rows) {
    __m256 acc[8];
    for (int i = 0; i < W; ++i) acc[i] = _mm256_loadu_ps(out + 8 * i);
    for (size_t j = 0; j < n_rows; ++j) {
        const __m256 w = _mm256_broadcast_ss(p + j);
        const float* r = rows + j * stride;
        for (int i = 0; i < W; ++i) acc[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 8 * i), acc[i]);
    }
    for (int i = 0; i < W; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

void axpy_rows_avx2(float* out, const float* p, const float* rows, size_t stride, size_t n_rows, size_t d) {
    size_t c = 0;
    for (; c + 64 <= d; c += 64) axpy_block<8>(out + c, p, rows + c, stride, n_rows);
    for (; c + 32 <= d; c += 32) axpy_block<4>(out + c, p, rows + c, stride, n_rows);
    for (; c + 8 <= d; c += 8) axpy_block<1>(out + c, p, rows + c, stride, n_rows);
    if (c < d) dense_axpy_rows_generic(out + c, p, rows + c, stride, n_rows, d - c);
}

}  // namespace

const DenseGemmKernels& dense_gemm_kernels_avx2() {
    static const DenseGemmKernels table = {"avx2", panel_rows_avx2, dot_rows_avx2, axpy_rows_avx2};
    return table;
}

}  // namespace cactus
