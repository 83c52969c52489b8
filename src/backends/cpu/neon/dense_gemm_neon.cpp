// AArch64 ASIMD micro-kernel of dense_gemm (see dense_gemm.h): R rows of A (1..6) times one packed
// panel of 16 columns: 4R q-register accumulators (24 at R = 6 of the 32), four panel loads and R
// scalar broadcasts per k; each C element is one fused multiply-add chain in k order, as the
// generic kernel's std::fma loop. Base ARMv8 (see activations_neon.cpp for the pragma).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("arch=armv8-a")
#endif

#include <arm_neon.h>

#include "backends/cpu/dense_gemm.h"

namespace cactus {

namespace {

template <int R>
void panel_rows_t(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, bool accumulate) {
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < 4; ++q) acc[r][q] = accumulate ? vld1q_f32(c + r * ldc + 4 * q) : vdupq_n_f32(0.0f);
    for (size_t kk = 0; kk < k; ++kk) {
        float32x4_t b[4];
        for (int q = 0; q < 4; ++q) b[q] = vld1q_f32(panel + kk * kDensePanel + 4 * q);
        for (int r = 0; r < R; ++r) {
            const float32x4_t x = vdupq_n_f32(a[r * lda + kk]);
            for (int q = 0; q < 4; ++q) acc[r][q] = vfmaq_f32(acc[r][q], x, b[q]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < 4; ++q) vst1q_f32(c + r * ldc + 4 * q, acc[r][q]);
}

void panel_rows_neon(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows,
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

const DenseGemmKernels& dense_gemm_kernels_neon() {
    static const DenseGemmKernels table = {"neon", panel_rows_neon, dense_dot_rows_generic, dense_axpy_rows_generic};
    return table;
}

}  // namespace cactus
