// AVX-512 micro-kernels of dense_gemm (see dense_gemm.h): R rows of A (1..6) times one packed panel
// of 16 columns (one zmm accumulator per row), or times two panels at once (panel_rows2: two per
// row). One panel gives only R <= 6 independent FMA chains, fewer than the FMA latency times the
// two FMA ports needs; two panels give 12 and keep the FMA ports busy (embed_bench: MiniLM at 1
// thread). Each C element is still one FMA chain in k order: the same bits as every tier
// (tests/ops/dense_gemm_test.cpp). The few-query kernels are the AVX2 tier's.
#include <immintrin.h>

#include "backends/cpu/dense_gemm.h"

namespace cactus {

namespace {

#define CACTUS_DENSE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

template <int R>
void panel_rows_t(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, bool accumulate) {
    // Named accumulators (not an array), so GCC keeps them in registers across the k loop.
    const __m512 zero = _mm512_setzero_ps();
    __m512 c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero;
#define CACTUS_DENSE_LOAD(r) \
    if constexpr (R > r) c##r = _mm512_loadu_ps(c + (r)*ldc);
    if (accumulate) {
        CACTUS_DENSE_ROWS(CACTUS_DENSE_LOAD)
    }
#undef CACTUS_DENSE_LOAD
    for (size_t kk = 0; kk < k; ++kk) {
        const __m512 b = _mm512_loadu_ps(panel + kk * kDensePanel);
        const float* ak = a + kk;
#define CACTUS_DENSE_FMA(r) \
    if constexpr (R > r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(ak[(r)*lda]), b, c##r);
        CACTUS_DENSE_ROWS(CACTUS_DENSE_FMA)
#undef CACTUS_DENSE_FMA
    }
#define CACTUS_DENSE_STORE(r) \
    if constexpr (R > r) _mm512_storeu_ps(c + (r)*ldc, c##r);
    CACTUS_DENSE_ROWS(CACTUS_DENSE_STORE)
#undef CACTUS_DENSE_STORE
}

// Two panels: 2R accumulators (12 at R = 6), two panel loads and R broadcasts per k.
template <int R>
void panel_rows2_t(float* c, size_t ldc, const float* a, size_t lda, const float* p0, const float* p1, size_t k,
                   bool accumulate) {
    const __m512 zero = _mm512_setzero_ps();
    __m512 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
    __m512 c30 = zero, c31 = zero, c40 = zero, c41 = zero, c50 = zero, c51 = zero;
#define CACTUS_DENSE_LOAD(r)                         \
    if constexpr (R > r) {                           \
        c##r##0 = _mm512_loadu_ps(c + (r)*ldc);      \
        c##r##1 = _mm512_loadu_ps(c + (r)*ldc + 16); \
    }
    if (accumulate) {
        CACTUS_DENSE_ROWS(CACTUS_DENSE_LOAD)
    }
#undef CACTUS_DENSE_LOAD
    for (size_t kk = 0; kk < k; ++kk) {
        const __m512 b0 = _mm512_loadu_ps(p0 + kk * kDensePanel);
        const __m512 b1 = _mm512_loadu_ps(p1 + kk * kDensePanel);
        const float* ak = a + kk;
#define CACTUS_DENSE_FMA(r)                           \
    if constexpr (R > r) {                            \
        const __m512 x = _mm512_set1_ps(ak[(r)*lda]); \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);    \
        c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);    \
    }
        CACTUS_DENSE_ROWS(CACTUS_DENSE_FMA)
#undef CACTUS_DENSE_FMA
    }
#define CACTUS_DENSE_STORE(r)                        \
    if constexpr (R > r) {                           \
        _mm512_storeu_ps(c + (r)*ldc, c##r##0);      \
        _mm512_storeu_ps(c + (r)*ldc + 16, c##r##1); \
    }
    CACTUS_DENSE_ROWS(CACTUS_DENSE_STORE)
#undef CACTUS_DENSE_STORE
}

#undef CACTUS_DENSE_ROWS

void panel_rows2_avx512(float* c, size_t ldc, const float* a, size_t lda, const float* p0, const float* p1, size_t k,
                        size_t rows, bool accumulate) {
    switch (rows) {
        case 1:
            return panel_rows2_t<1>(c, ldc, a, lda, p0, p1, k, accumulate);
        case 2:
            return panel_rows2_t<2>(c, ldc, a, lda, p0, p1, k, accumulate);
        case 3:
            return panel_rows2_t<3>(c, ldc, a, lda, p0, p1, k, accumulate);
        case 4:
            return panel_rows2_t<4>(c, ldc, a, lda, p0, p1, k, accumulate);
        case 5:
            return panel_rows2_t<5>(c, ldc, a, lda, p0, p1, k, accumulate);
        default:
            return panel_rows2_t<6>(c, ldc, a, lda, p0, p1, k, accumulate);
    }
}

void panel_rows_avx512(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows,
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

}  // namespace

const DenseGemmKernels& dense_gemm_kernels_avx512() {
    static const DenseGemmKernels table = {"avx512", panel_rows_avx512, dense_gemm_kernels_avx2().dot_rows,
                                           dense_gemm_kernels_avx2().axpy_rows, panel_rows2_avx512};
    return table;
}

}  // namespace cactus
