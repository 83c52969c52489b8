// The float weight types (F16, BF16, F32 with F32 activations) of every kernel table: each GEMM
// tile shape (1 .. kGemmTileTokens tokens, padded row strides, lengths with ragged tails of 1..7
// elements and chunk counts that are not a multiple of 4) gives exactly the table's vec_dot, and
// matmul of odd shapes (ragged n_in and n_out, token counts around the tile and token-block sizes,
// 1 and 3 threads) gives exactly vec_dot of each (row, token).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

const DType kFloatTypes[] = {DType::F16, DType::BF16, DType::F32};

TEST(FloatTiles, EveryTileShapeEqualsVecDot) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(41);
        for (DType type : kFloatTypes) {
            const GemmTileFn tile = k->gemm_tile[static_cast<size_t>(type)];
            const VecDotFn dot = k->vec_dot[static_cast<size_t>(type)];
            ASSERT_NE(dot, nullptr) << k->isa_name << " " << dtype_name(type);
            if (tile == nullptr) continue;
            for (size_t n : {1, 7, 8, 9, 24, 31, 40, 57, 100, 257, 385, 1536}) {
                const size_t w_stride = dtype_row_bytes(type, n) + 6;  // padded rows, 2-byte aligned
                const std::vector<uint8_t> w = test::quantized_rows(type, n, kGemmTileRows, w_stride, rng);
                const size_t x_floats = n + 3;  // padded token rows
                const std::vector<float> x = test::random_floats(kGemmTileTokens * x_floats, rng, n % 2 ? 1.0f : 30.0f);
                for (size_t n_tokens = 1; n_tokens <= kGemmTileTokens; ++n_tokens) {
                    const size_t y_stride = kGemmTileRows + 3;
                    std::vector<float> y(y_stride * n_tokens, NAN);
                    tile(y.data(), y_stride, w.data(), w_stride, x.data(), x_floats * sizeof(float), n, n_tokens);
                    for (size_t t = 0; t < n_tokens; ++t) {
                        for (size_t r = 0; r < kGemmTileRows; ++r) {
                            const float want = dot(w.data() + r * w_stride, x.data() + t * x_floats, n);
                            ASSERT_EQ(y[t * y_stride + r], want) << k->isa_name << " " << dtype_name(type) << " n=" << n
                                                                 << " tokens=" << n_tokens << " t=" << t << " r=" << r;
                        }
                        for (size_t r = kGemmTileRows; r < y_stride; ++r) EXPECT_TRUE(std::isnan(y[t * y_stride + r]));
                    }
                }
            }
        }
    }
}

// vec_dot of every float type stays within float rounding of the double-precision dot product on
// rows of large and small magnitudes (the scalar reference is itself checked against it).
TEST(FloatTiles, VecDotMatchesDoubleDot) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(43);
        for (DType type : kFloatTypes) {
            for (size_t n : {3, 33, 129, 1000, 4099}) {
                const std::vector<uint8_t> w = test::quantized_rows(type, n, 1, dtype_row_bytes(type, n), rng);
                const std::vector<float> x = test::random_floats(n, rng, 100.0f);
                std::vector<float> wf(n);
                dequantize_row_ref(type, wf.data(), w.data(), n);
                double exact = 0.0;
                for (size_t i = 0; i < n; ++i) exact += static_cast<double>(wf[i]) * x[i];
                const double scale = test::abs_dot(wf, x);
                const float got = k->vec_dot[static_cast<size_t>(type)](w.data(), x.data(), n);
                EXPECT_LE(std::fabs(got - exact), 2e-6 * scale + 1e-30)
                    << k->isa_name << " " << dtype_name(type) << " n=" << n << " got " << got << " want " << exact;
            }
        }
    }
}

// matmul over odd shapes equals the table's vec_dot of each (row, token) bit for bit. 600 tokens
// of 389 floats cross the matmul's token blocks (about 128 KiB of activations each).
TEST(FloatTiles, MatmulEqualsVecDotOnOddShapes) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(3)};
    std::mt19937 rng(47);
    struct Shape {
        size_t n_in, n_out, n_tokens;
    };
    const Shape shapes[] = {{389, 37, 5}, {389, 70, 17}, {64, 13, 9}, {389, 21, 600}, {7, 6, 3}};
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kFloatTypes) {
            const VecDotFn dot = k->vec_dot[static_cast<size_t>(type)];
            for (const Shape& s : shapes) {
                const size_t stride = dtype_row_bytes(type, s.n_in) + 4;
                const std::vector<uint8_t> w = test::quantized_rows(type, s.n_in, s.n_out, stride, rng);
                const std::vector<float> x = test::random_floats(s.n_tokens * s.n_in, rng);
                for (ThreadPool& pool : pools) {
                    std::vector<float> y(s.n_tokens * s.n_out, NAN);
                    matmul_with(*k, y.data(), w.data(), type, stride, x.data(), s.n_tokens, s.n_in, s.n_out, pool);
                    for (size_t t = 0; t < s.n_tokens; ++t) {
                        for (size_t o = 0; o < s.n_out; ++o) {
                            const float want = dot(w.data() + o * stride, x.data() + t * s.n_in, s.n_in);
                            ASSERT_EQ(y[t * s.n_out + o], want)
                                << k->isa_name << " " << dtype_name(type) << " n_in=" << s.n_in << " n_out=" << s.n_out
                                << " t=" << t << " o=" << o << " threads=" << pool.size();
                        }
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace cactus
