// dense_gemm (the encoders' f32 attention products and F16/F32 linears) on every tier this CPU
// runs: odd shapes (rows around the 6-row micro-kernel, columns around the 16-wide panels, k from
// 1 to Whisper's 1500 across the kDenseKBlock edges), both layouts of B, f32 or half B, padded
// strides, 1 and 3 threads. Each element must equal, bit for bit, one std::fma chain in k order
// (half B widened exactly); nothing outside C's [m, n] window is written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/dense_gemm.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/quant.h"

namespace cactus {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

float reference(const float* a, const DenseB& b, size_t i, size_t j, size_t lda, size_t k) {
    float acc = 0.0f;
    for (size_t kk = 0; kk < k; ++kk) {
        const size_t at = b.k_major ? kk * b.stride + j : j * b.stride + kk;
        const float bv = b.half != nullptr ? fp16_to_fp32(b.half[at]) : b.b[at];
        acc = std::fma(a[i * lda + kk], bv, acc);
    }
    return acc;
}

std::vector<uint16_t> to_half(const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = fp32_to_fp16(v[i]);
    return h;
}

TEST(DenseGemm, EveryTierEqualsOneFmaChainPerElement) {
    std::mt19937 rng(7);
    ThreadPool one(1), three(3);
    std::vector<float> packed;
    for (const DenseGemmKernels* kernels : dense_gemm_tables()) {
        for (size_t m : {1, 5, 6, 7, 13, 40}) {
            for (size_t n : {1, 15, 16, 17, 33, 64}) {
                for (size_t k :
                     {size_t{1}, size_t{7}, size_t{64}, size_t{129}, kDenseKBlock, kDenseKBlock + 1, size_t{1500}}) {
                    for (int layout = 0; layout < 4; ++layout) {
                        const bool k_major = layout & 1, half = layout & 2;
                        const size_t lda = k + 3, ldc = n + 5;
                        const size_t b_stride = (k_major ? n : k) + 2;
                        const std::vector<float> a = random_floats(m * lda, rng);
                        const std::vector<float> bm = random_floats((k_major ? k : n) * b_stride, rng);
                        const std::vector<uint16_t> bh = to_half(bm);
                        DenseB b = {bm.data(), b_stride, k_major};
                        if (half) b.half = bh.data();
                        ThreadPool& pool = (m + n + k + layout) % 2 ? three : one;
                        std::vector<float> c(m * ldc, NAN);
                        dense_gemm(c.data(), ldc, a.data(), lda, b, m, n, k, packed, pool, *kernels);
                        for (size_t i = 0; i < m; ++i) {
                            for (size_t j = 0; j < ldc; ++j) {
                                const float got = c[i * ldc + j];
                                if (j >= n) {
                                    ASSERT_TRUE(std::isnan(got)) << "wrote past column " << n;
                                    continue;
                                }
                                ASSERT_EQ(got, reference(a.data(), b, i, j, lda, k))
                                    << kernels->isa_name << " m=" << m << " n=" << n << " k=" << k
                                    << " k_major=" << k_major << " half=" << half << " at (" << i << ", " << j << ")";
                            }
                        }
                    }
                }
            }
        }
    }
}

// dot_rows / axpy_rows (few queries, straight from strided rows): every tier against double sums,
// odd widths around the 8-wide vectors and 4-row groups; axpy adds to what out holds.
TEST(DenseGemm, DotAndAxpyRowsOnEveryTier) {
    std::mt19937 rng(9);
    for (const DenseGemmKernels* kernels : dense_gemm_tables()) {
        for (size_t n_rows : {1, 3, 4, 9, 150}) {
            for (size_t d : {1, 7, 8, 24, 64, 100}) {
                const size_t stride = d + 5;
                const std::vector<float> rows = random_floats(n_rows * stride, rng);
                const std::vector<float> q = random_floats(d, rng), p = random_floats(n_rows, rng);
                std::vector<float> s(n_rows + 1, NAN), out = random_floats(d + 1, rng);
                const std::vector<float> out0 = out;
                kernels->dot_rows(s.data(), q.data(), rows.data(), stride, n_rows, d);
                kernels->axpy_rows(out.data(), p.data(), rows.data(), stride, n_rows, d);
                for (size_t j = 0; j < n_rows; ++j) {
                    double ref = 0.0;
                    for (size_t c = 0; c < d; ++c) ref += double(q[c]) * rows[j * stride + c];
                    ASSERT_NEAR(s[j], ref, 1e-5 * (1.0 + std::sqrt(double(d)))) << kernels->isa_name << " dot " << j;
                }
                ASSERT_TRUE(std::isnan(s[n_rows])) << "dot_rows wrote past n_rows";
                for (size_t c = 0; c < d; ++c) {
                    double ref = out0[c];
                    for (size_t j = 0; j < n_rows; ++j) ref += double(p[j]) * rows[j * stride + c];
                    ASSERT_NEAR(out[c], ref, 1e-5 * (1.0 + std::sqrt(double(n_rows)) * 4))
                        << kernels->isa_name << " axpy n_rows=" << n_rows << " d=" << d << " c=" << c;
                }
                ASSERT_EQ(out[d], out0[d]) << "axpy_rows wrote past d";
            }
        }
    }
}

TEST(DenseGemm, ShortStridesAreRefused) {
    ThreadPool pool(1);
    std::vector<float> packed, a(64), bm(64), c(64);
    EXPECT_THROW(dense_gemm(c.data(), 3, a.data(), 8, {bm.data(), 8, false}, 2, 4, 8, packed, pool), Error);
    EXPECT_THROW(dense_gemm(c.data(), 4, a.data(), 7, {bm.data(), 8, false}, 2, 4, 8, packed, pool), Error);
    EXPECT_THROW(dense_gemm(c.data(), 4, a.data(), 8, {bm.data(), 3, true}, 2, 4, 8, packed, pool), Error);
}

}  // namespace
}  // namespace cactus
