// The CUDA prompt products (cuda_mmq.cu: n > 8 tokens, int8 tensor-core tiles of 64 rows x 64
// tokens over x rounded once; F16/BF16/F32 weights on tf32 tiles) against the CPU backend on random
// data, and the CACTUS_CUDA_MMQ=0 fallback. Shapes: n = 9, 17, 33, 64, 100, 512 (partial and several token tiles); n_out 77, 130,
// 1000 (partial row tiles); n_in 256 .. 8960, with 576 and 8864 leaving a partial 256-element step
// for the 32-element formats.
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
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "backends/backend.h"
#include "ops/quant.h"

namespace cactus {
namespace {

using testing::Held;
using testing::hold;
using testing::hold_f32;
using testing::random_floats;

const DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                        DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Shape {
    size_t n;
    size_t n_out;
    size_t n_in;
};

// Every shape's n_in is a multiple of 256 unless legacy_only (then of 32 only).
struct Case {
    Shape shape;
    bool legacy_only;
};
const Case kCases[] = {
    {{9, 77, 256}, false},    {{17, 1000, 512}, false}, {{33, 77, 576}, true},    {{64, 130, 2304}, false},
    {{100, 77, 8960}, false}, {{40, 77, 8864}, true},   {{512, 77, 1024}, false},
};

// A weight [rows, width] of `type` on both backends, and its dequantized values.
struct Weight {
    std::vector<float> values;
    Held cpu;
    Held gpu;
};

Weight make_weight(Backend& cpu, Backend& gpu, DType type, size_t width, size_t rows, uint32_t seed) {
    Weight w;
    const std::vector<float> src = random_floats(width * rows, seed);
    const size_t rb = dtype_row_bytes(type, width);
    std::vector<uint8_t> bytes(rb * rows, 0);
    w.values.assign(width * rows, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
        quantize_row_ref(type, bytes.data() + r * rb, src.data() + r * width, width);
        dequantize_row_ref(type, w.values.data() + r * width, bytes.data() + r * rb, width);
    }
    w.cpu = hold(cpu, type, width, rows, bytes.data());
    w.gpu = hold(gpu, type, width, rows, bytes.data());
    return w;
}

std::vector<float> fetch(Backend& be, const Held& h) {
    be.synchronize(std::chrono::milliseconds(30000));
    return download_f32(be, h.t);
}

// y = x W^T on both backends; every element within 2e-5 sum_i |w_i x_i| + 1e-5 of the CPU's.
void compare(Backend& cpu, Backend& gpu, DType type, const Shape& s, uint32_t seed) {
    const Weight w = make_weight(cpu, gpu, type, s.n_in, s.n_out, seed);
    const std::vector<float> x = random_floats(s.n * s.n_in, seed + 7, -2.0f, 2.0f);
    const Held xc = hold_f32(cpu, x, s.n_in), xg = hold_f32(gpu, x, s.n_in);
    const Held yc = hold(cpu, DType::F32, s.n_out, s.n), yg = hold(gpu, DType::F32, s.n_out, s.n);
    cpu.matmul(yc.t, w.cpu.t, xc.t);
    gpu.matmul(yg.t, w.gpu.t, xg.t);
    const std::vector<float> got = fetch(gpu, yg), want = fetch(cpu, yc);
    const std::string what = std::string(dtype_name(type)) + " n " + std::to_string(s.n) + " n_out " +
                             std::to_string(s.n_out) + " n_in " + std::to_string(s.n_in);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t t = 0; t < s.n; ++t) {
        for (size_t r = 0; r < s.n_out; ++r) {
            double mag = 0.0;
            for (size_t i = 0; i < s.n_in; ++i)
                mag += std::fabs(static_cast<double>(w.values[r * s.n_in + i]) * x[t * s.n_in + i]);
            const size_t at = t * s.n_out + r;
            ASSERT_LE(std::fabs(static_cast<double>(got[at]) - want[at]), 2e-5 * mag + 1e-5)
                << what << ": token " << t << " row " << r << " is " << got[at] << ", cpu " << want[at];
        }
    }
}

class CudaMmq : public ::testing::Test {
protected:
    void SetUp() override {
        setenv("CACTUS_CUDA_MMQ", "1", 1);  // on whatever the caller's environment says
        gpu_ = testing::try_cuda(&why_);
        unsetenv("CACTUS_CUDA_MMQ");
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
        const Weight w = make_weight(*cpu_, *gpu_, type, n_in, n_out, 11);
        const Held xc = hold_f32(*cpu_, x, n_in), xg = hold_f32(*gpu_, x, n_in);
        const Held yc = hold(*cpu_, DType::F32, n_out, n), yg = hold(*gpu_, DType::F32, n_out, n);
        cpu_->matmul(yc.t, w.cpu.t, xc.t);
        gpu_->matmul(yg.t, w.gpu.t, xg.t);
        const std::vector<float> got = fetch(*gpu_, yg), want = fetch(*cpu_, yc);
        for (size_t t = 0; t < n; ++t) {
            for (size_t r = 0; r < n_out; ++r) {
                double mag = 0.0;
                for (size_t i = 0; i < n_in; ++i)
                    mag += std::fabs(static_cast<double>(w.values[r * n_in + i]) * x[t * n_in + i]);
                const size_t at = t * n_out + r;
                ASSERT_LE(std::fabs(static_cast<double>(got[at]) - want[at]), 2e-5 * mag + 1e-5)
                    << dtype_name(type) << ": token " << t << " row " << r << " is " << got[at] << ", cpu " << want[at];
            }
        }
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
    setenv("CACTUS_CUDA_MMQ", "0", 1);
    std::string why;
    std::unique_ptr<Backend> off = testing::try_cuda(&why);
    unsetenv("CACTUS_CUDA_MMQ");
    ASSERT_TRUE(off) << why;
    EXPECT_NE(off->describe().find("tiled prompt products off"), std::string::npos) << off->describe();
    compare(*cpu_, *off, DType::Q4_K, Shape{17, 77, 512}, 900);
    compare(*cpu_, *off, DType::Q8_0, Shape{33, 77, 576}, 901);
    compare(*cpu_, *off, DType::F16, Shape{33, 77, 100}, 902);
}

}  // namespace
}  // namespace cactus
