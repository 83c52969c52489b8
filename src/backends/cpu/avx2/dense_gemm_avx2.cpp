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
#define CACTUS_DENSE_LOAD(r)                               \
    if constexpr (R > r) {                                 \
        c##r##0 = _mm256_loadu_ps(c + (r) * ldc);          \
        c##r##1 = _mm256_loadu_ps(c + (r) * ldc + 8);      \
    }
    if (accumulate) {
        CACTUS_DENSE_ROWS(CACTUS_DENSE_LOAD)
    }
#undef CACTUS_DENSE_LOAD
    for (size_t kk = 0; kk < k; ++kk) {
        const __m256 b0 = _mm256_loadu_ps(panel + kk * kDensePanel);
        const __m256 b1 = _mm256_loadu_ps(panel + kk * kDensePanel + 8);
        const float* ak = a + kk;
#define CACTUS_DENSE_FMA(r)                                    \
    if constexpr (R > r) {                                     \
        const __m256 x = _mm256_broadcast_ss(ak + (r) * lda);  \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);             \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);             \
    }
        CACTUS_DENSE_ROWS(CACTUS_DENSE_FMA)
#undef CACTUS_DENSE_FMA
    }
#define CACTUS_DENSE_STORE(r)                              \
    if constexpr (R > r) {                                 \
        _mm256_storeu_ps(c + (r) * ldc, c##r##0);          \
        _mm256_storeu_ps(c + (r) * ldc + 8, c##r##1);      \
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

}  // namespace

const DenseGemmKernels& dense_gemm_kernels_avx2() {
    static const DenseGemmKernels table = {"avx2", panel_rows_avx2};
    return table;
}

}  // namespace cactus
