#include "backends/cpu/dense_gemm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"

namespace cactus {

namespace {

void panel_rows_generic(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows) {
    for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < kDensePanel; ++j) {
            float acc = 0.0f;
            for (size_t kk = 0; kk < k; ++kk) acc = std::fma(a[r * lda + kk], panel[kk * kDensePanel + j], acc);
            c[r * ldc + j] = acc;
        }
    }
}

// packed [n_panels][k][16]: panel p holds columns 16p .. 16p + 15 of C, zero past n.
void pack_panels(float* packed, const DenseB& b, size_t n, size_t k, size_t p) {
    float* out = packed + p * k * kDensePanel;  // [k][16]
    const size_t j0 = p * kDensePanel;
    const size_t width = std::min(kDensePanel, n - j0);
    for (size_t kk = 0; kk < k; ++kk) {
        float* dst = out + kk * kDensePanel;
        if (b.k_major) {
            std::copy_n(b.b + kk * b.stride + j0, width, dst);
        } else {
            for (size_t j = 0; j < width; ++j) dst[j] = b.b[(j0 + j) * b.stride + kk];
        }
        std::fill(dst + width, dst + kDensePanel, 0.0f);
    }
}

// Rows [i0, i0 + rows) of C against panels [p0, p1); the last panel goes through a 16-wide tile
// when n is not a multiple of 16.
void row_block(float* c, size_t ldc, const float* a, size_t lda, const float* packed, size_t n, size_t k, size_t i0,
               size_t rows, size_t p0, size_t p1, const DenseGemmKernels& kernels) {
    float edge[kDenseMaxRows * kDensePanel];
    for (size_t p = p0; p < p1; ++p) {
        const float* panel = packed + p * k * kDensePanel;
        const size_t j0 = p * kDensePanel;
        if (j0 + kDensePanel <= n) {
            kernels.panel_rows(c + i0 * ldc + j0, ldc, a + i0 * lda, lda, panel, k, rows);
            continue;
        }
        kernels.panel_rows(edge, kDensePanel, a + i0 * lda, lda, panel, k, rows);
        for (size_t r = 0; r < rows; ++r) std::copy_n(edge + r * kDensePanel, n - j0, c + (i0 + r) * ldc + j0);
    }
}

// Packed bytes of B that one sweep over the rows of A keeps in the L2 cache: every block of rows of
// A then meets panels already in cache (a sweep over all panels of a 1536-wide B per block of 6
// rows would stream 2.4 MB from memory each time).
constexpr size_t kPanelGroupBytes = 192 * 1024;

}  // namespace

const DenseGemmKernels& dense_gemm_kernels_generic() {
    static const DenseGemmKernels table = {"generic", panel_rows_generic};
    return table;
}

void dense_gemm(float* c, size_t ldc, const float* a, size_t lda, const DenseB& b, size_t m, size_t n, size_t k,
                std::vector<float>& packed, ThreadPool& pool, const DenseGemmKernels& kernels) {
    if (m == 0 || n == 0) return;
    if (ldc < n || (lda < k && m > 1) || (b.stride < (b.k_major ? n : k) && k > 0)) {
        fail("dense_gemm: strides lda %zu ldc %zu b %zu too small for [%zu, %zu] x [%zu, %zu]^T", lda, ldc, b.stride, m,
             k, n, k);
    }
    const size_t n_panels = (n + kDensePanel - 1) / kDensePanel;
    packed.resize(n_panels * std::max<size_t>(k, 1) * kDensePanel);
    pool.parallel_for(n_panels, [&](size_t begin, size_t end) {
        for (size_t p = begin; p < end; ++p) pack_panels(packed.data(), b, n, k, p);
    });
    const size_t n_blocks = (m + kDenseMaxRows - 1) / kDenseMaxRows;
    const size_t group = std::max<size_t>(1, kPanelGroupBytes / (std::max<size_t>(k, 1) * kDensePanel * sizeof(float)));
    for (size_t p0 = 0; p0 < n_panels; p0 += group) {
        const size_t p1 = std::min(n_panels, p0 + group);
        pool.parallel_for(n_blocks, [&](size_t begin, size_t end) {
            for (size_t blk = begin; blk < end; ++blk) {
                const size_t i0 = blk * kDenseMaxRows;
                row_block(c, ldc, a, lda, packed.data(), n, k, i0, std::min(kDenseMaxRows, m - i0), p0, p1, kernels);
            }
        });
    }
}

}  // namespace cactus
