// The CUDA decode products (cuda_gemv.cu: n <= 8 tokens, integer dot products, one launch for
// several products and the fused epilogues) against the CPU backend on random data, and the
// CACTUS_CUDA_FUSED=0 fallbacks, and the two passes of CACTUS_CUDA_GEMV_SPLIT=1 (9-16 tokens).
// Sizes: n = 1, 3, 8 (the fused path) and 9 (the prefill kernel);
// odd n_out; n_in 256, 576 (legacy and float types only: K-quants need multiples of 256) and 2304.
//
// Tolerance: both backends round x exactly as the CPU's vec_dot_type does and sum the same
// per-block integer products; only the float summation order differs. The bound is that of
// BackendOps.MatmulEveryWeightTypeAgainstTheCpuDotReference: 2e-5 * sum_i |w_i x_i| + 1e-5 per
// element (relative float rounding over a few thousand terms, far below one quantization step).
// Without a GPU every test reports itself skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

const DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                        DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16, DType::F32};
const std::vector<size_t> kTokens = {1, 3, 8, 9};

std::vector<size_t> widths_for(DType type) {
    if (dtype_traits(type).block_size == 256) return {256, 2304};
    return {256, 576, 2304};
}

// A weight [rows, width] of `type` on both backends, and its dequantized values.
struct Weight {
    std::vector<uint8_t> bytes;
    std::vector<float> values;
    Held cpu;
    Held gpu;
};

Weight make_weight(Backend& cpu, Backend& gpu, DType type, size_t width, size_t rows, uint32_t seed) {
    Weight w;
    const std::vector<float> src = random_floats(width * rows, seed);
    const size_t rb = dtype_row_bytes(type, width);
    w.bytes.assign(rb * rows, 0);
    w.values.assign(width * rows, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
        quantize_row_ref(type, w.bytes.data() + r * rb, src.data() + r * width, width);
        dequantize_row_ref(type, w.values.data() + r * width, w.bytes.data() + r * rb, width);
    }
    w.cpu = hold(cpu, type, width, rows, w.bytes.data());
    w.gpu = hold(gpu, type, width, rows, w.bytes.data());
    return w;
}

// sum_i |w_i x_i| per (token, row): the scale of the bound.
std::vector<double> magnitudes(const Weight& w, const std::vector<float>& x, size_t n, size_t width, size_t rows) {
    std::vector<double> mag(n * rows, 0.0);
    for (size_t t = 0; t < n; ++t) {
        for (size_t r = 0; r < rows; ++r) {
            double m = 0.0;
            for (size_t i = 0; i < width; ++i)
                m += std::fabs(static_cast<double>(w.values[r * width + i]) * x[t * width + i]);
            mag[t * rows + r] = m;
        }
    }
    return mag;
}

double dot_bound(double mag) { return 2e-5 * mag + 1e-5; }

std::vector<float> fetch(Backend& be, const Held& h) {
    be.synchronize(std::chrono::milliseconds(30000));
    return download_f32(be, h.t);
}

// got vs want element by element within bound[i]; reports the first failure with its place.
void expect_within(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& bound,
                   const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), bound[i])
            << what << ": element " << i << " is " << got[i] << ", cpu " << want[i];
    }
}

class CudaGemv : public ::testing::Test {
protected:
    void SetUp() override {
        setenv("CACTUS_CUDA_FUSED", "1", 1);  // on whatever the caller's environment says
        gpu_ = testing::try_cuda(&why_);
        unsetenv("CACTUS_CUDA_FUSED");
        if (!gpu_) GTEST_SKIP() << "GPU test skipped: " << why_;
        cpu_ = make_backend(BackendOptions{"cpu", 2});
    }
    std::string why_;
    std::unique_ptr<Backend> gpu_;
    std::unique_ptr<Backend> cpu_;
};

// y = x W^T on both backends for one weight, every token count.
void compare_matmul(Backend& cpu, Backend& gpu, DType type, size_t n_in, size_t n_out, uint32_t seed,
                    const std::vector<size_t>& tokens = kTokens) {
    const Weight w = make_weight(cpu, gpu, type, n_in, n_out, seed);
    for (size_t n : tokens) {
        const std::vector<float> x = random_floats(n * n_in, seed + 100 + static_cast<uint32_t>(n), -2.0f, 2.0f);
        const Held xc = hold_f32(cpu, x, n_in), xg = hold_f32(gpu, x, n_in);
        const Held yc = hold(cpu, DType::F32, n_out, n), yg = hold(gpu, DType::F32, n_out, n);
        cpu.matmul(yc.t, w.cpu.t, xc.t);
        gpu.matmul(yg.t, w.gpu.t, xg.t);
        std::vector<double> bound = magnitudes(w, x, n, n_in, n_out);
        for (double& b : bound) b = dot_bound(b);
        expect_within(fetch(gpu, yg), fetch(cpu, yc), bound,
                      std::string(dtype_name(type)) + " n_in " + std::to_string(n_in) + " n_out " +
                          std::to_string(n_out) + " n " + std::to_string(n));
    }
}

TEST_F(CudaGemv, MatmulEveryTypeTokenCountAndShapeMatchesCpu) {
    for (DType type : kTypes) {
        for (size_t n_in : widths_for(type)) {
            for (size_t n_out : {size_t(7), size_t(33), size_t(577)}) {
                compare_matmul(*cpu_, *gpu_, type, n_in, n_out, 17 + static_cast<uint32_t>(type));
                if (HasFatalFailure()) return;
            }
        }
    }
}

// q, k, v with biases (one launch of three products), then a mixed run of types: groups of one
// type (Q4_K, Q4_K | Q6_K | Q4_K) and more than four products of one type (split in two launches).
TEST_F(CudaGemv, MatmulsWithBiasesAndMixedTypesMatchCpu) {
    struct Spec {
        DType type;
        size_t n_out;
        bool bias;
    };
    const std::vector<std::vector<Spec>> sets = {
        {{DType::Q8_0, 577, true}, {DType::Q8_0, 33, true}, {DType::Q8_0, 33, true}},
        {{DType::Q4_0, 64, true}, {DType::Q4_0, 7, false}, {DType::Q4_0, 7, true}},
        {{DType::Q4_K, 33, true}, {DType::Q4_K, 7, false}, {DType::Q6_K, 577, true}, {DType::Q4_K, 9, true}},
        {{DType::Q5_0, 7, true},
         {DType::Q5_0, 8, false},
         {DType::Q5_0, 9, true},
         {DType::Q5_0, 10, true},
         {DType::Q5_0, 11, true}},
        {{DType::F16, 33, true}, {DType::F16, 7, true}},
    };
    const size_t n_in = 768;
    uint32_t seed = 300;
    for (const std::vector<Spec>& set : sets) {
        std::vector<Weight> weights;
        std::vector<std::vector<float>> biases;
        for (const Spec& s : set) {
            weights.push_back(make_weight(*cpu_, *gpu_, s.type, n_in, s.n_out, ++seed));
            biases.push_back(random_floats(s.n_out, ++seed));
        }
        for (size_t n : kTokens) {
            const std::vector<float> x = random_floats(n * n_in, ++seed, -2.0f, 2.0f);
            const Held xc = hold_f32(*cpu_, x, n_in), xg = hold_f32(*gpu_, x, n_in);
            std::vector<Held> yc, yg, bc, bg;
            std::vector<SharedInputProduct> pc, pg;
            for (size_t i = 0; i < set.size(); ++i) {
                yc.push_back(hold(*cpu_, DType::F32, set[i].n_out, n));
                yg.push_back(hold(*gpu_, DType::F32, set[i].n_out, n));
                bc.push_back(hold_f32(*cpu_, biases[i], set[i].n_out));
                bg.push_back(hold_f32(*gpu_, biases[i], set[i].n_out));
            }
            for (size_t i = 0; i < set.size(); ++i) {
                pc.push_back({&yc[i].t, &weights[i].cpu.t, set[i].bias ? &bc[i].t : nullptr});
                pg.push_back({&yg[i].t, &weights[i].gpu.t, set[i].bias ? &bg[i].t : nullptr});
            }
            cpu_->matmuls(pc.data(), pc.size(), xc.t);
            gpu_->matmuls(pg.data(), pg.size(), xg.t);
            for (size_t i = 0; i < set.size(); ++i) {
                std::vector<double> bound = magnitudes(weights[i], x, n, n_in, set[i].n_out);
                for (double& b : bound) b = dot_bound(b) + 1e-6;  // + the bias add's rounding
                expect_within(fetch(*gpu_, yg[i]), fetch(*cpu_, yc[i]), bound,
                              std::string("matmuls ") + dtype_name(set[i].type) + " product " + std::to_string(i) +
                                  " n " + std::to_string(n));
                if (HasFatalFailure()) return;
            }
        }
    }
}

// The device's matmuls equal its matmul (+ add) bit for bit, as Backend::matmuls promises, and
// matmul_accumulate equals matmul + add bit for bit: the same rows computed the same way.
TEST_F(CudaGemv, FusedProductsEqualTheDevicesUnfusedOpsBitForBit) {
    const size_t n_in = 576, n_out = 577;
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q6_K}) {
        const size_t width = dtype_traits(type).block_size == 256 ? 768 : n_in;
        const Weight w = make_weight(*cpu_, *gpu_, type, width, n_out, 41);
        const std::vector<float> bias = random_floats(n_out, 42);
        const Held b = hold_f32(*gpu_, bias, n_out);
        for (size_t n : kTokens) {
            const std::vector<float> x = random_floats(n * width, 43 + static_cast<uint32_t>(n), -2.0f, 2.0f);
            const std::vector<float> y0 = random_floats(n * n_out, 44);
            const Held xg = hold_f32(*gpu_, x, width);
            const Held one = hold(*gpu_, DType::F32, n_out, n), fused = hold(*gpu_, DType::F32, n_out, n);
            gpu_->matmul(one.t, w.gpu.t, xg.t);
            gpu_->add(one.t, one.t, b.t);
            const SharedInputProduct p{&fused.t, &w.gpu.t, &b.t};
            gpu_->matmuls(&p, 1, xg.t);
            const std::vector<float> a = fetch(*gpu_, one), c = fetch(*gpu_, fused);
            EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)))
                << dtype_name(type) << " matmuls n " << n;
            const Held acc = hold_f32(*gpu_, y0, n_out), sum = hold_f32(*gpu_, y0, n_out);
            const Held tmp = hold(*gpu_, DType::F32, n_out, n);
            gpu_->matmul_accumulate(acc.t, w.gpu.t, xg.t, tmp.t);
            gpu_->matmul(tmp.t, w.gpu.t, xg.t);
            gpu_->add(sum.t, sum.t, tmp.t);
            const std::vector<float> d = fetch(*gpu_, acc), e = fetch(*gpu_, sum);
            EXPECT_EQ(0, std::memcmp(d.data(), e.data(), d.size() * sizeof(float)))
                << dtype_name(type) << " matmul_accumulate n " << n;
        }
    }
}

// x += in W^T: the residual add folded into the product.
void compare_accumulate(Backend& cpu, Backend& gpu, DType type, size_t n_in, size_t n_out, uint32_t seed,
                        const std::vector<size_t>& tokens = kTokens) {
    const Weight w = make_weight(cpu, gpu, type, n_in, n_out, seed);
    for (size_t n : tokens) {
        const std::vector<float> in = random_floats(n * n_in, seed + 1 + static_cast<uint32_t>(n), -2.0f, 2.0f);
        const std::vector<float> y0 = random_floats(n * n_out, seed + 50 + static_cast<uint32_t>(n), -4.0f, 4.0f);
        const Held ic = hold_f32(cpu, in, n_in), ig = hold_f32(gpu, in, n_in);
        const Held yc = hold_f32(cpu, y0, n_out), yg = hold_f32(gpu, y0, n_out);
        const Held tc = hold(cpu, DType::F32, n_out, n), tg = hold(gpu, DType::F32, n_out, n);
        cpu.matmul_accumulate(yc.t, w.cpu.t, ic.t, tc.t);
        gpu.matmul_accumulate(yg.t, w.gpu.t, ig.t, tg.t);
        std::vector<double> bound = magnitudes(w, in, n, n_in, n_out);
        for (size_t i = 0; i < bound.size(); ++i) bound[i] = dot_bound(bound[i]) + 1e-6 * std::fabs(y0[i]);
        expect_within(fetch(gpu, yg), fetch(cpu, yc), bound,
                      std::string("matmul_accumulate ") + dtype_name(type) + " n_in " + std::to_string(n_in) +
                          " n_out " + std::to_string(n_out) + " n " + std::to_string(n));
    }
}

TEST_F(CudaGemv, MatmulAccumulateMatchesCpu) {
    for (DType type : kTypes) {
        for (size_t n_in : widths_for(type)) {
            compare_accumulate(*cpu_, *gpu_, type, n_in, n_in == 256 ? 577 : 33, 500 + static_cast<uint32_t>(type));
            if (HasFatalFailure()) return;
        }
    }
}

// gate = act(in W_gate^T) * (in W_up^T). The bound propagates the two products' bounds through
// act(g) u (|act'| <= 1.13 for SiLU and both GELUs, 0.25 for the sigmoid; |act(g)| <= max(1, |g|))
// plus 1e-5 relative for the activation's own rounding (the element-wise ops' bound).
void compare_gated(Backend& cpu, Backend& gpu, DType type, DType up_type, size_t n_in, size_t n_ff, Activation act,
                   uint32_t seed, const std::vector<size_t>& tokens = kTokens) {
    const Weight wg = make_weight(cpu, gpu, type, n_in, n_ff, seed);
    const Weight wu = make_weight(cpu, gpu, up_type, n_in, n_ff, seed + 1);
    for (size_t n : tokens) {
        const std::vector<float> in = random_floats(n * n_in, seed + 2 + static_cast<uint32_t>(n), -2.0f, 2.0f);
        const Held ic = hold_f32(cpu, in, n_in), ig = hold_f32(gpu, in, n_in);
        const Held gc = hold(cpu, DType::F32, n_ff, n), gg = hold(gpu, DType::F32, n_ff, n);
        const Held uc = hold(cpu, DType::F32, n_ff, n), ug = hold(gpu, DType::F32, n_ff, n);
        cpu.gated_matmul(gc.t, uc.t, wg.cpu.t, wu.cpu.t, ic.t, act);
        gpu.gated_matmul(gg.t, ug.t, wg.gpu.t, wu.gpu.t, ig.t, act);
        // The reference's gate and up products (the CPU's matmul) for the propagation.
        const Held g1 = hold(cpu, DType::F32, n_ff, n), u1 = hold(cpu, DType::F32, n_ff, n);
        cpu.matmul(g1.t, wg.cpu.t, ic.t);
        cpu.matmul(u1.t, wu.cpu.t, ic.t);
        const std::vector<float> g = fetch(cpu, g1), u = fetch(cpu, u1), want = fetch(cpu, gc);
        const std::vector<double> mg = magnitudes(wg, in, n, n_in, n_ff), mu = magnitudes(wu, in, n, n_in, n_ff);
        const double slope = act == Activation::SIGMOID ? 0.25 : 1.13;
        std::vector<double> bound(want.size());
        for (size_t i = 0; i < bound.size(); ++i) {
            bound[i] = slope * std::fabs(u[i]) * dot_bound(mg[i]) +
                       std::max(1.0, std::fabs(static_cast<double>(g[i]))) * dot_bound(mu[i]) +
                       1e-5 * (1.0 + std::fabs(want[i]));
        }
        expect_within(fetch(gpu, gg), want, bound,
                      std::string("gated_matmul ") + dtype_name(type) + "/" + dtype_name(up_type) + " act " +
                          std::to_string(static_cast<int>(act)) + " n_in " + std::to_string(n_in) + " n " +
                          std::to_string(n));
    }
}

TEST_F(CudaGemv, GatedMatmulEveryActivationMatchesCpu) {
    const Activation acts[] = {Activation::SILU, Activation::GELU_TANH, Activation::GELU_ERF, Activation::SIGMOID};
    uint32_t seed = 700;
    for (DType type : kTypes) {
        for (Activation act : acts) {
            const size_t n_in = dtype_traits(type).block_size == 256 ? 2304 : 576;
            compare_gated(*cpu_, *gpu_, type, type, n_in, 577, act, seed += 10);
            if (HasFatalFailure()) return;
        }
    }
    // Gate and up of different types: the unfused sequence.
    compare_gated(*cpu_, *gpu_, DType::Q4_K, DType::Q6_K, 256, 33, Activation::SILU, seed + 10);
}

// Long rows (n_in 8960: a row split over 8 warps, n = 8 needs the shared-memory opt-in) and many
// rows (several row iterations per block, a partial last block), through every epilogue.
TEST_F(CudaGemv, LongRowsAndManyRowsMatchCpu) {
    compare_matmul(*cpu_, *gpu_, DType::Q8_0, 8960, 33, 1001);
    compare_matmul(*cpu_, *gpu_, DType::Q4_K, 8960, 33, 1002);
    compare_matmul(*cpu_, *gpu_, DType::Q6_K, 8960, 7, 1003);
    compare_matmul(*cpu_, *gpu_, DType::Q4_0, 256, 8963, 1004);
    compare_matmul(*cpu_, *gpu_, DType::Q8_0, 2304, 3001, 1005);
    compare_accumulate(*cpu_, *gpu_, DType::Q5_0, 8960, 33, 1006);
    compare_gated(*cpu_, *gpu_, DType::Q4_K, DType::Q4_K, 8960, 33, Activation::SILU, 1007);
    compare_gated(*cpu_, *gpu_, DType::Q4_0, DType::Q4_0, 256, 8963, Activation::GELU_TANH, 1008);
}

// CACTUS_CUDA_FUSED=0: the old matmul kernel and the base class's unfused sequences, same results.
TEST_F(CudaGemv, FusedOffFallsBackAndStillMatchesCpu) {
    setenv("CACTUS_CUDA_FUSED", "0", 1);
    std::string why;
    std::unique_ptr<Backend> off = testing::try_cuda(&why);
    unsetenv("CACTUS_CUDA_FUSED");
    ASSERT_TRUE(off) << why;
    EXPECT_NE(off->describe().find("fused products off"), std::string::npos) << off->describe();
    EXPECT_EQ(gpu_->describe().find("fused products off"), std::string::npos) << gpu_->describe();
    compare_matmul(*cpu_, *off, DType::Q4_K, 256, 33, 900);
    compare_matmul(*cpu_, *off, DType::Q5_0, 576, 7, 901);
    compare_accumulate(*cpu_, *off, DType::Q8_0, 576, 33, 902);
    compare_gated(*cpu_, *off, DType::Q4_0, DType::Q4_0, 576, 33, Activation::GELU_TANH, 903);
}

// 9-16 tokens in two passes of the decode products (the default; CACTUS_CUDA_GEMV_SPLIT=0 turns them
// off), through every epilogue, within the same bound of the CPU; rows 0-7 of a 16-token product
// equal an 8-token product's bit for bit (the int8 tiles would give other bits), and 17 tokens take
// the tiles again.
TEST_F(CudaGemv, SplitPassesTakeNineToSixteenTokens) {
    const testing::EnvOverride env{{"CACTUS_CUDA_FUSED", "1"}, {"CACTUS_CUDA_GEMV_SPLIT", "1"}};
    std::string why;
    std::unique_ptr<Backend> split = testing::try_cuda(&why);
    ASSERT_TRUE(split) << why;
    const std::vector<size_t> tokens = {9, 13, 16, 17};
    for (DType type : {DType::Q4_K, DType::Q6_K, DType::Q5_0, DType::Q8_0}) {
        const size_t n_in = dtype_traits(type).block_size == 256 ? 2304 : 576;
        compare_matmul(*cpu_, *split, type, n_in, 577, 1000 + static_cast<uint32_t>(type), tokens);
        compare_accumulate(*cpu_, *split, type, n_in, 33, 1100 + static_cast<uint32_t>(type), tokens);
        compare_gated(*cpu_, *split, type, type, n_in, 577, Activation::SILU, 1200 + static_cast<uint32_t>(type),
                      tokens);
        if (HasFatalFailure()) return;
    }
    const size_t n_in = 2304, n_out = 333;
    const Weight w = make_weight(*cpu_, *split, DType::Q4_K, n_in, n_out, 1300);
    const std::vector<float> x = random_floats(16 * n_in, 1301, -2.0f, 2.0f);
    const Held x16 = hold_f32(*split, x, n_in);
    const Held x8 = hold_f32(*split, std::vector<float>(x.begin(), x.begin() + 8 * n_in), n_in);
    const Held y16 = hold(*split, DType::F32, n_out, 16), y8 = hold(*split, DType::F32, n_out, 8);
    split->matmul(y16.t, w.gpu.t, x16.t);
    split->matmul(y8.t, w.gpu.t, x8.t);
    const std::vector<float> a = fetch(*split, y16), b = fetch(*split, y8);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), b.size() * sizeof(float)), 0) << "rows 0-7 of the two passes";
    EXPECT_EQ(split->describe().find("decode passes off"), std::string::npos) << split->describe();
    const testing::EnvOverride off_env{{"CACTUS_CUDA_GEMV_SPLIT", "0"}};
    const std::unique_ptr<Backend> off = testing::try_cuda(&why);
    ASSERT_TRUE(off) << why;
    EXPECT_NE(off->describe().find("9-16-token decode passes off"), std::string::npos) << off->describe();
}

}  // namespace
}  // namespace cactus
