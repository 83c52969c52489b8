// AVX2 + FMA micro-kernel of dense_gemm (see dense_gemm.h): R rows of A (1..6) times one packed
// panel of 16 columns. 2R ymm accumulators (12 at R = 6), two panel loads and R broadcasts per k;
// each C element is one FMA chain in k order, as the generic kernel's std::fma loop.
#include <immintrin.h>

#include "backends/cpu/dense_gemm.h"

namespace cactus {

namespace {

template <int R>
void panel_rows_t(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (size_t kk = 0; kk < k; ++kk) {
        const __m256 b0 = _mm256_loadu_ps(panel + kk * kDensePanel);
        const __m256 b1 = _mm256_loadu_ps(panel + kk * kDensePanel + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 x = _mm256_broadcast_ss(a + r * lda + kk);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(c + r * ldc, acc[r][0]);
        _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    }
}

void panel_rows_avx2(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows) {
    switch (rows) {
        case 1:
            return panel_rows_t<1>(c, ldc, a, lda, panel, k);
        case 2:
            return panel_rows_t<2>(c, ldc, a, lda, panel, k);
        case 3:
            return panel_rows_t<3>(c, ldc, a, lda, panel, k);
        case 4:
            return panel_rows_t<4>(c, ldc, a, lda, panel, k);
        case 5:
            return panel_rows_t<5>(c, ldc, a, lda, panel, k);
        default:
            return panel_rows_t<6>(c, ldc, a, lda, panel, k);
    }
}

}  // namespace

const DenseGemmKernels& dense_gemm_kernels_avx2() {
    static const DenseGemmKernels table = {"avx2", panel_rows_avx2};
    return table;
}

}  // namespace cactus
