// The CUDA prompt products (cuda_mmq.cu: n > 8 tokens, int8 tensor-core tiles of 64 rows x 64 or
// 128 tokens over x rounded once; F16/BF16/F32 weights on tf32 tiles) against the CPU backend on
// random data, the two tile widths against each other (CACTUS_CUDA_MMQ_TOKENS: bit for bit), and
// the CACTUS_CUDA_MMQ=0 fallback. cuBLAS's f16 products (test_cuda_gemm.cpp) are kept off here
// (CACTUS_CUDA_GEMM_TOKENS=0), and so are the 9-16-token decode passes (CACTUS_CUDA_GEMV_SPLIT=0),
// so every prompt takes the tiles. Shapes: n = 9, 17, 33, 64, 100, 512 (partial and several token
// tiles; 129, 140, 200, 517 for the widths); n_out 77, 130, 200, 1000 (partial row tiles); n_in
// 256 .. 8960, with 576 and 8864 leaving a partial 256-element step for the 32-element formats.
//
// Tolerance: both backends round x exactly as the CPU's vec_dot_type does and sum the same
// per-block integer products; only the float summation order differs (the tile scales each 32- or
// 16-element block sum apart where the CPU scales a 256-element super-block sum once). The bound is
// test_cuda_gemv's: 2e-5 * sum_i |w_i x_i| + 1e-5 per element. Float weights: x split into two tf32
// parts represents each term to about 2^-22 relative, far inside the same bound. Without a GPU every test reports
// itself skipped with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "random_product.h"
#include "backends/backend.h"
#include "ops/quant.h"

namespace cactus {
namespace {

using testing::Held;
using testing::hold;
using testing::hold_f32;
using testing::random_floats;

using testing::describe;
using testing::make_product;
using testing::Product;
using testing::Shape;

const auto& kTypes = testing::kQuantTypes;

// Every shape's n_in is a multiple of 256 unless legacy_only (then of 32 only).
struct Case {
    Shape shape;
    bool legacy_only;
};
const Case kCases[] = {
    {{9, 77, 256}, false},    {{17, 1000, 512}, false}, {{33, 77, 576}, true},    {{64, 130, 2304}, false},
    {{100, 77, 8960}, false}, {{40, 77, 8864}, true},   {{512, 77, 1024}, false},
};

// y [n, n_out] = x W^T on `be`.
std::vector<float> run(Backend& be, const Product& p) {
    const Shape& s = p.shape;
    const Held w = hold(be, p.type, s.n_in, s.n_out, p.bytes.data());
    const Held x = hold_f32(be, p.x, s.n_in);
    const Held y = hold(be, DType::F32, s.n_out, s.n);
    be.matmul(y.t, w.t, x.t);
    be.synchronize(std::chrono::milliseconds(30000));
    return download_f32(be, y.t);
}

// Every element of got within 2e-5 sum_i |w_i x_i| + 1e-5 of the CPU's (want).
void expect_near_cpu(const Product& p, const std::vector<float>& got, const std::vector<float>& want) {
    const Shape& s = p.shape;
    ASSERT_EQ(got.size(), want.size()) << describe(p);
    for (size_t t = 0; t < s.n; ++t) {
        for (size_t r = 0; r < s.n_out; ++r) {
            double mag = 0.0;
            for (size_t i = 0; i < s.n_in; ++i)
                mag += std::fabs(static_cast<double>(p.values[r * s.n_in + i]) * p.x[t * s.n_in + i]);
            const size_t at = t * s.n_out + r;
            ASSERT_LE(std::fabs(static_cast<double>(got[at]) - want[at]), 2e-5 * mag + 1e-5)
                << describe(p) << ": token " << t << " row " << r << " is " << got[at] << ", cpu " << want[at];
        }
    }
}

void compare(Backend& cpu, Backend& gpu, DType type, const Shape& s, uint32_t seed) {
    const Product p = make_product(type, s, seed);
    expect_near_cpu(p, run(gpu, p), run(cpu, p));
}

// A CUDA backend with the tiled products on and CACTUS_CUDA_MMQ_TOKENS=value; the caller's
// environment is restored after. Null, with the reason in why, if it cannot be made.
std::unique_ptr<Backend> cuda_with_tile_tokens(const char* value, std::string* why) {
    const testing::EnvOverride env{{"CACTUS_CUDA_MMQ", "1"},
                                   {"CACTUS_CUDA_MMQ_TOKENS", value},
                                   {"CACTUS_CUDA_GEMM_TOKENS", "0"},
                                   {"CACTUS_CUDA_GEMV_SPLIT", "0"}};
    return testing::try_cuda(why);
}

class CudaMmq : public ::testing::Test {
protected:
    void SetUp() override {
        {  // on whatever the caller's environment says
            const testing::EnvOverride env{
                {"CACTUS_CUDA_MMQ", "1"}, {"CACTUS_CUDA_GEMM_TOKENS", "0"}, {"CACTUS_CUDA_GEMV_SPLIT", "0"}};
            gpu_ = testing::try_cuda(&why_);
        }
        if (!gpu_) GTEST_SKIP() << "GPU test skipped: " << why_;
        cpu_ = make_backend(BackendOptions{"cpu", 2});
    }
    std::string why_;
    std::unique_ptr<Backend> gpu_;
    std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaMmq, EveryTypeAndShapeMatchesCpu) {
    EXPECT_EQ(gpu_->describe().find("tiled prompt products off"), std::string::npos) << gpu_->describe();
    uint32_t seed = 100;
    for (DType type : kTypes) {
        const bool k_quant = dtype_traits(type).block_size == 256;
        for (const Case& c : kCases) {
            if (c.legacy_only && k_quant) continue;
            compare(*cpu_, *gpu_, type, c.shape, seed += 10);
            if (HasFatalFailure()) return;
        }
    }
}

// Rows that are all zero (x rounds to d = 0) and a row of one large value among small ones.
TEST_F(CudaMmq, ZeroAndSpikyActivationsMatchCpu) {
    const size_t n = 20, n_in = 512, n_out = 77;
    std::vector<float> x = random_floats(n * n_in, 5, -1e-3f, 1e-3f);
    for (size_t i = 0; i < n_in; ++i) x[3 * n_in + i] = 0.0f;
    x[7 * n_in + 100] = 900.0f;
    x[8 * n_in + 300] = -900.0f;
    for (DType type : kTypes) {
        Product p = make_product(type, Shape{n, n_out, n_in}, 11);
        p.x = x;
        expect_near_cpu(p, run(*gpu_, p), run(*cpu_, p));
        if (HasFatalFailure()) return;
    }
}

// Float weights (tf32 tiles, x split in two): n_in of any size, partial 32-element steps included.
TEST_F(CudaMmq, FloatWeightsMatchCpu) {
    const Shape shapes[] = {{9, 77, 256}, {17, 130, 100}, {64, 1000, 576}, {100, 77, 2304}, {200, 33, 1000}};
    uint32_t seed = 400;
    for (DType type : {DType::F16, DType::BF16, DType::F32}) {
        for (const Shape& s : shapes) {
            compare(*cpu_, *gpu_, type, s, seed += 10);
            if (HasFatalFailure()) return;
        }
    }
}

// With CACTUS_CUDA_MMQ=0: prompts take matmul's one-warp-per-row kernel, same results.
TEST_F(CudaMmq, OffFallsBackAndStillMatchesCpu) {
    std::string why;
    std::unique_ptr<Backend> off;
    {
        const testing::EnvOverride env{
            {"CACTUS_CUDA_MMQ", "0"}, {"CACTUS_CUDA_GEMM_TOKENS", "0"}, {"CACTUS_CUDA_GEMV_SPLIT", "0"}};
        off = testing::try_cuda(&why);
    }
    ASSERT_TRUE(off) << why;
    EXPECT_NE(off->describe().find("tiled prompt products off"), std::string::npos) << off->describe();
    compare(*cpu_, *off, DType::Q4_K, Shape{17, 77, 512}, 900);
    compare(*cpu_, *off, DType::Q8_0, Shape{33, 77, 576}, 901);
    compare(*cpu_, *off, DType::F16, Shape{33, 77, 100}, 902);
}

// 64- and 128-token tiles (CACTUS_CUDA_MMQ_TOKENS) give the same bits for every element: each
// element's K loop and per-group scaling do not depend on the tile. Token counts past one or several
// wide tiles, row counts past whole row tiles, and (legacy types) a partial 256-element step.
TEST_F(CudaMmq, TileWidthsAgreeBitForBit) {
    std::string why;
    const std::unique_ptr<Backend> narrow = cuda_with_tile_tokens("64", &why);
    ASSERT_TRUE(narrow) << why;
    const std::unique_ptr<Backend> wide = cuda_with_tile_tokens("128", &why);
    ASSERT_TRUE(wide) << why;
    EXPECT_NE(narrow->describe().find("prompt tiles of 64 tokens"), std::string::npos) << narrow->describe();
    EXPECT_NE(wide->describe().find("prompt tiles of 128 tokens"), std::string::npos) << wide->describe();
    const Case cases[] = {
        {{129, 77, 256}, false},
        {{200, 130, 512}, false},
        {{517, 200, 1024}, false},
        {{140, 77, 576}, true},
    };
    uint32_t seed = 700;
    for (DType type : kTypes) {
        const bool k_quant = dtype_traits(type).block_size == 256;
        for (const Case& c : cases) {
            if (c.legacy_only && k_quant) continue;
            const Product p = make_product(type, c.shape, seed += 10);
            const std::vector<float> a = run(*narrow, p), b = run(*wide, p);
            ASSERT_EQ(a.size(), b.size()) << describe(p);
            for (size_t i = 0; i < a.size(); ++i) {
                uint32_t ba = 0, bb = 0;
                std::memcpy(&ba, &a[i], sizeof(ba));
                std::memcpy(&bb, &b[i], sizeof(bb));
                ASSERT_EQ(ba, bb) << describe(p) << ": token " << i / c.shape.n_out << " row " << i % c.shape.n_out
                                  << " is " << a[i] << " with 64-token tiles, " << b[i] << " with 128";
            }
            expect_near_cpu(p, b, run(*cpu_, p));
            if (HasFatalFailure()) return;
        }
    }
}

// Any other value of CACTUS_CUDA_MMQ_TOKENS stops the backend with a message naming it.
TEST_F(CudaMmq, BadTileWidthIsAClearError) {
    for (const char* bad : {"96", "256", "wide"}) {
        std::string why;
        EXPECT_FALSE(cuda_with_tile_tokens(bad, &why)) << bad;
        EXPECT_NE(why.find("CACTUS_CUDA_MMQ_TOKENS"), std::string::npos) << why;
        EXPECT_NE(why.find("64 or 128"), std::string::npos) << why;
    }
}

}  // namespace
}  // namespace cactus
