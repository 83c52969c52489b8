// The CUDA prompt products through cuBLAS on dequantized f16 (cuda_gemm.h: prompts of at least
// CACTUS_CUDA_GEMM_TOKENS tokens; F16 weights with x split in two f16 parts) against the exact
// product of the dequantized weights and x, in double. Shapes: n = 9 .. 512 tokens, n_out 77 .. 1000 (partial tiles), n_in 256 .. 8960 (576 for
// the 32-element formats only).
//
// Tolerance: x and W are each rounded to f16 (at most 2^-11 relative, the scale of x being a power
// of two) and summed in f32, so each term is off by at most about 2^-10 of |w x|: every element
// within 1.5e-3 * sum_i |w_i x_i| + 1e-5 of the exact product. And the f16 path must have at most
// half the root mean square error of the CPU's own int8 rounding of x, so switching a prompt to it
// never costs accuracy (and the int8 tiles, which round x as the CPU does, would not pass). Without a GPU (or without libcublas)
// every test reports itself skipped with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "random_product.h"
#include "backends/backend.h"
#include "ops/quant.h"

namespace cactus {
namespace {

using testing::EnvOverride;
using testing::Held;
using testing::hold;
using testing::hold_f32;
using testing::random_floats;

using testing::describe;
using testing::make_product;
using testing::Product;
using testing::Shape;

const auto& kTypes = testing::kQuantTypes;

// y [n, n_out] = x W^T on `be`, y first filled with NaN (every element must be written).
std::vector<float> run(Backend& be, const Product& p) {
    const Shape& s = p.shape;
    const Held w = hold(be, p.type, s.n_in, s.n_out, p.bytes.data());
    const Held x = hold_f32(be, p.x, s.n_in);
    const Held y = hold_f32(be, std::vector<float>(s.n * s.n_out, std::numeric_limits<float>::quiet_NaN()), s.n_out);
    be.matmul(y.t, w.t, x.t);
    be.synchronize(std::chrono::milliseconds(30000));
    return download_f32(be, y.t);
}

// The exact product (double) and sum_i |w_i x_i| per element.
void exact(const Product& p, std::vector<double>* want, std::vector<double>* mag) {
    const Shape& s = p.shape;
    want->assign(s.n * s.n_out, 0.0);
    mag->assign(s.n * s.n_out, 0.0);
    for (size_t t = 0; t < s.n; ++t) {
        for (size_t r = 0; r < s.n_out; ++r) {
            double acc = 0.0, m = 0.0;
            for (size_t i = 0; i < s.n_in; ++i) {
                const double term = static_cast<double>(p.values[r * s.n_in + i]) * p.x[t * s.n_in + i];
                acc += term;
                m += std::fabs(term);
            }
            (*want)[t * s.n_out + r] = acc;
            (*mag)[t * s.n_out + r] = m;
        }
    }
}

double rms_error(const std::vector<float>& got, const std::vector<double>& want) {
    double sum = 0.0;
    for (size_t i = 0; i < got.size(); ++i) sum += (got[i] - want[i]) * (got[i] - want[i]);
    return std::sqrt(sum / static_cast<double>(got.size()));
}

// Every element within the f16 bound of the exact product; returns the root mean square error.
double expect_near_exact(const Product& p, const std::vector<float>& got) {
    std::vector<double> want, mag;
    exact(p, &want, &mag);
    EXPECT_EQ(got.size(), want.size()) << describe(p);
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
        if (!(std::fabs(got[i] - want[i]) <= 1.5e-3 * mag[i] + 1e-5)) {
            ADD_FAILURE() << describe(p) << ": token " << i / p.shape.n_out << " row " << i % p.shape.n_out << " is "
                          << got[i] << ", exact " << want[i] << " (sum |w x| " << mag[i] << ")";
            return 0.0;
        }
    }
    return rms_error(got, want);
}

// A CUDA backend made under `tokens` as CACTUS_CUDA_GEMM_TOKENS; null with the reason otherwise. The
// 9-16-token steps' decode passes, which come before cuBLAS, are off (CACTUS_CUDA_GEMV_SPLIT=0), so
// 9 tokens take cuBLAS here.
std::unique_ptr<Backend> cuda_with_gemm_tokens(const char* tokens, std::string* why) {
    const EnvOverride env{
        {"CACTUS_CUDA_GEMM_TOKENS", tokens}, {"CACTUS_CUDA_GEMM_F16", "1"}, {"CACTUS_CUDA_GEMV_SPLIT", "0"}};
    return testing::try_cuda(why);
}

class CudaGemm : public ::testing::Test {
protected:
    void SetUp() override {
        gpu_ = cuda_with_gemm_tokens("9", &why_);  // every prompt product (n > 8) through cuBLAS
        if (!gpu_) GTEST_SKIP() << "GPU test skipped: " << why_;
        // cuBLAS is opened at the first prompt product: make one, then see whether it was.
        const Product probe = make_product(DType::Q8_0, Shape{9, 8, 32}, 1);
        run(*gpu_, probe);
        if (gpu_->describe().find("no cuBLAS") != std::string::npos) {
            GTEST_SKIP() << "GPU test skipped: " << gpu_->describe();
        }
        cpu_ = make_backend(BackendOptions{"cpu", 2});
    }
    std::string why_;
    std::unique_ptr<Backend> gpu_;
    std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaGemm, EveryTypeAndShapeIsTheExactProductWithinF16Rounding) {
    EXPECT_NE(gpu_->describe().find("cuBLAS f16 prompt products from 9 tokens"), std::string::npos) << gpu_->describe();
    const Shape shapes[] = {{9, 77, 256}, {17, 1000, 512}, {64, 130, 2304}, {100, 77, 8960}, {512, 300, 1024}};
    uint32_t seed = 100;
    for (DType type : kTypes) {
        for (const Shape& s : shapes) {
            const Product p = make_product(type, s, seed += 10);
            const double gpu_rms = expect_near_exact(p, run(*gpu_, p));
            if (HasFailure()) return;
            std::vector<double> want, mag;
            exact(p, &want, &mag);
            const double cpu_rms = rms_error(run(*cpu_, p), want);
            // Half the CPU's error at most: f16 rounding is about 8x finer than the int8 rounding of x,
            // which the int8 tiles share with the CPU, so this also fails if the product was not
            // computed through cuBLAS at all.
            EXPECT_LE(gpu_rms, 0.5 * cpu_rms) << describe(p) << ": the f16 product is not clearly nearer the exact "
                                              << "one than the CPU's int8 rounding of x";
        }
    }
    // The 32-element formats also take rows that are not whole 256-element super-blocks.
    for (DType type : {DType::Q4_0, DType::Q5_1, DType::Q8_0}) {
        const Product p = make_product(type, Shape{33, 77, 576}, seed += 10);
        expect_near_exact(p, run(*gpu_, p));
    }
}

// F16 weights (the encoders') take cuBLAS with x split in two f16 parts: f32 accuracy. Every
// element within 1e-5 * sum_i |w_i x_i| + 1e-7 of the exact product (each term about 2^-22 off,
// plus the tensor cores' f32 sums), the RMS error at most 32x that of the CPU's f32 arithmetic (x
// rounded once to f16 would be thousands of times it; the tensor cores' sums over 3,072 elements
// measured 20x on an H100), and other bits than the tf32 tiles give
// (CACTUS_CUDA_GEMM_TOKENS=0), so the product did take the split path (CACTUS_CUDA_GEMM_F16=1, set by
// cuda_with_gemm_tokens). Odd widths too.
TEST_F(CudaGemm, F16WeightsKeepF32AccuracyThroughTheSplit) {
    std::string why;
    std::unique_ptr<Backend> tiles = cuda_with_gemm_tokens("0", &why);
    ASSERT_TRUE(tiles) << why;
    const Shape shapes[] = {{9, 77, 256}, {64, 333, 768}, {70, 130, 771}, {1024, 96, 3072}, {257, 1000, 1152}};
    uint32_t seed = 700;
    for (const Shape& s : shapes) {
        Product p = make_product(DType::F16, s, seed += 10);
        for (size_t i = 0; i < p.x.size(); i += 13) p.x[i] *= 1e-3f;  // digits that a single f16 x would lose
        const std::vector<float> got = run(*gpu_, p);
        std::vector<double> want, mag;
        exact(p, &want, &mag);
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * mag[i] + 1e-7)
                << describe(p) << ": token " << i / s.n_out << " row " << i % s.n_out;
        }
        const double cpu_rms = rms_error(run(*cpu_, p), want);
        EXPECT_LE(rms_error(got, want), 32.0 * cpu_rms + 1e-9) << describe(p);
        EXPECT_NE(got, run(*tiles, p)) << describe(p) << ": the same bits as the tf32 tiles";
    }
}

// x far above f16's range (1e6) and far below its normal range (1e-7): the power-of-two scale keeps
// both exact to f16 precision; without it the first would be inf and the second lose its digits.
// x among f32's subnormals (1e-42): the scale stops at 2^-126, and the product stays finite.
TEST_F(CudaGemm, ActivationsOutsideF16RangeAreScaledNotLost) {
    for (const float magnitude : {1e6f, 1e-7f, 1e-42f}) {
        for (DType type : {DType::Q4_K, DType::Q8_0}) {
            Product p = make_product(type, Shape{40, 77, 512}, 300);
            for (float& v : p.x) v *= magnitude;
            std::vector<float> got = run(*gpu_, p);
            for (float v : got) ASSERT_TRUE(std::isfinite(v)) << describe(p) << " with x ~ " << magnitude;
            expect_near_exact(p, got);
        }
    }
}

// matmul_accumulate adds the product to x (cuBLAS's beta = 1), and matmul ignores what y held.
TEST_F(CudaGemm, AccumulateAddsTheProduct) {
    const Product p = make_product(DType::Q4_K, Shape{70, 130, 1024}, 500);
    const Shape& s = p.shape;
    const std::vector<float> x0 = random_floats(s.n * s.n_out, 501, -3.0f, 3.0f);
    const Held w = hold(*gpu_, p.type, s.n_in, s.n_out, p.bytes.data());
    const Held in = hold_f32(*gpu_, p.x, s.n_in);
    const Held x = hold_f32(*gpu_, x0, s.n_out);
    const Held tmp = hold(*gpu_, DType::F32, s.n_out, s.n);
    gpu_->matmul_accumulate(x.t, w.t, in.t, tmp.t);
    gpu_->synchronize(std::chrono::milliseconds(30000));
    std::vector<float> got = download_f32(*gpu_, x.t);
    for (size_t i = 0; i < got.size(); ++i) got[i] -= x0[i];
    expect_near_exact(p, got);
}

// A step with two products, repeated: captured once into a graph and replayed, same bits each time.
TEST_F(CudaGemm, RepeatedStepsReplayAGraphWithTheSameBits) {
    std::unique_ptr<Backend> be;
    {
        const EnvOverride env{{"CACTUS_CUDA_GRAPHS", "1"}, {"CACTUS_CUDA_GEMM_TOKENS", "9"}};
        be = testing::try_cuda(&why_);
    }
    ASSERT_TRUE(be) << why_;
    const Product a = make_product(DType::Q4_K, Shape{96, 130, 512}, 600);
    const Product b = make_product(DType::Q6_K, Shape{96, 77, 512}, 601);
    const Held wa = hold(*be, a.type, 512, 130, a.bytes.data());
    const Held wb = hold(*be, b.type, 512, 77, b.bytes.data());
    const Held x = hold_f32(*be, a.x, 512);
    const Held ya = hold(*be, DType::F32, 130, 96);
    const Held yb = hold(*be, DType::F32, 77, 96);
    std::vector<float> out_a(96 * 130), out_b(96 * 77), first_a, first_b;
    be->synchronize(std::chrono::milliseconds(30000));
    const uint64_t replays_before = be->counters().graph_replays;
    for (int step = 0; step < 4; ++step) {
        be->upload(x.t, a.x.data(), a.x.size() * sizeof(float));
        be->matmul(ya.t, wa.t, x.t);
        be->matmul(yb.t, wb.t, x.t);
        be->download(out_a.data(), ya.t, out_a.size() * sizeof(float));
        be->download(out_b.data(), yb.t, out_b.size() * sizeof(float));
        if (step == 0) {
            first_a = out_a;
            first_b = out_b;
            expect_near_exact(a, out_a);
        }
        ASSERT_EQ(std::memcmp(out_a.data(), first_a.data(), out_a.size() * sizeof(float)), 0) << "step " << step;
        ASSERT_EQ(std::memcmp(out_b.data(), first_b.data(), out_b.size() * sizeof(float)), 0) << "step " << step;
    }
    EXPECT_GE(be->counters().graph_replays - replays_before, 1u) << "the repeated step never replayed a graph";
}

// The setting: 0 turns the path off (prompts take the int8 tiles), anything but a count is refused.
TEST(CudaGemmSetting, OffAndBadValues) {
    std::string why;
    std::unique_ptr<Backend> off = cuda_with_gemm_tokens("0", &why);
    if (!off) GTEST_SKIP() << "GPU test skipped: " << why;
    EXPECT_NE(off->describe().find("cuBLAS prompt products off (CACTUS_CUDA_GEMM_TOKENS=0)"), std::string::npos)
        << off->describe();
    for (const char* bad : {"-1", "many", "12x"}) {
        std::string bad_why;
        EXPECT_FALSE(cuda_with_gemm_tokens(bad, &bad_why)) << bad;
        EXPECT_NE(bad_why.find("CACTUS_CUDA_GEMM_TOKENS"), std::string::npos) << bad_why;
    }
}

}  // namespace
}  // namespace cactus
