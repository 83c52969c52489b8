// AVX-512 micro-kernel of dense_gemm (see dense_gemm.h): R rows of A (1..6) times one packed panel
// of 16 columns, one zmm accumulator per row. Per k: one panel load and R broadcasts for R FMAs,
// half the FMA instructions of the AVX2 kernel (two ymm halves per row), so the loads, not the FMA
// ports, bound it. Each C element is still one FMA chain in k order: the same bits as every tier
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

#undef CACTUS_DENSE_ROWS

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
                                           dense_gemm_kernels_avx2().axpy_rows};
    return table;
}

}  // namespace cactus
