// The conformer ops (clamp, transpose, depthwise_conv, attention_local, glu's sigmoid, gelu's silu) of every
// backend against their scalar references (src/ops/conformer_ref.h) on random data of odd sizes.
// Bounds: f32 element-wise and data movement exact or 1e-6; the attention 1e-5 of the output scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "ops/conformer_ref.h"
#include "ops/ops_ref.h"

namespace cactus {
namespace {

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

float worst_abs(const std::vector<float>& got, const std::vector<float>& want) {
    float worst = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) {
        const float d = std::fabs(got[i] - want[i]);
        if (!(d <= worst)) worst = d;  // NaN counts as worst
    }
    return worst;
}

class ConformerOps : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        try {
            be_ = make_backend(BackendOptions{GetParam(), 3});
        } catch (const Error& e) {
            GTEST_SKIP() << "backend " << GetParam() << " is not usable here: " << e.what();
        }
    }
    Tensor f32(const std::vector<float>& host, size_t width) {
        buffers_.push_back(be_->alloc(host.size() * sizeof(float)));
        const Tensor t = make_tensor(buffers_.back().get(), 0, DType::F32, width, host.size() / width);
        be_->upload(t, host.data(), host.size() * sizeof(float));
        return t;
    }
    Tensor zeros(size_t width, size_t rows) { return f32(std::vector<float>(width * rows, 0.0f), width); }
    std::vector<float> get(const Tensor& t) {
        be_->synchronize(std::chrono::milliseconds(30000));
        return download_f32(*be_, t);
    }

    std::unique_ptr<Backend> be_;
    std::vector<std::unique_ptr<Buffer>> buffers_;
};

TEST_P(ConformerOps, ClampTransposeSigmoidGluAndSilu) {
    const size_t n = 37, width = 23;
    const std::vector<float> a = randoms(n * width, 1, 3.0f), b = randoms(n * width, 2, 3.0f);
    std::vector<float> want(a.size());
    const Tensor y = zeros(width, n);
    be_->clamp(y, f32(a, width), -1.25f, 0.75f);
    clamp_ref(want.data(), a.data(), a.size(), -1.25f, 0.75f);
    EXPECT_EQ(worst_abs(get(y), want), 0.0f) << "clamp";
    be_->clamp(y, f32(a, width), 0.0f, INFINITY);
    clamp_ref(want.data(), a.data(), a.size(), 0.0f, INFINITY);
    EXPECT_EQ(worst_abs(get(y), want), 0.0f) << "relu";
    const Tensor yt = zeros(n, width);
    be_->transpose(yt, f32(a, width));
    transpose_ref(want.data(), a.data(), n, width);
    EXPECT_EQ(worst_abs(get(yt), want), 0.0f) << "transpose";
    be_->glu(y, f32(a, width), f32(b, width), Activation::SIGMOID);
    sigmoid_glu_ref(want.data(), a.data(), b.data(), a.size());
    EXPECT_LE(worst_abs(get(y), want), 1e-6f * 3.0f) << "sigmoid glu";
    be_->gelu(y, f32(a, width), Activation::SILU);
    for (size_t i = 0; i < a.size(); ++i) want[i] = silu_ref(a[i]);
    EXPECT_LE(worst_abs(get(y), want), 1e-5f * 3.0f) << "silu";
}

TEST_P(ConformerOps, CausalDepthwiseConv) {
    for (size_t kernel : {1, 5}) {
        const size_t n = 29, width = 19;
        const std::vector<float> x = randoms(n * width, 3), w = randoms(width * kernel, 4);
        const Tensor y = zeros(width, n);
        be_->depthwise_conv(y, f32(x, width), f32(w, kernel));
        std::vector<float> want(x.size());
        for (size_t t = 0; t < n; ++t)
            causal_depthwise_conv_row_ref(want.data() + t * width, x.data(), w.data(), t, width, kernel);
        EXPECT_LE(worst_abs(get(y), want), 1e-6f) << "kernel " << kernel;
    }
    // The reference itself: row 0 of a kernel-5 convolution sees only its last tap.
    const std::vector<float> x = {2.0f}, w = {1, 1, 1, 1, 0.5f};
    float y0 = 0.0f;
    causal_depthwise_conv_row_ref(&y0, x.data(), w.data(), 0, 1, 5);
    EXPECT_EQ(y0, 1.0f);
}

TEST_P(ConformerOps, LocalAttentionWithRelativeKeys) {
    LocalAttention a;
    a.n_head = 3;
    a.head_dim = 7;
    a.window = 5;
    a.k_scale = 1.3f;
    a.softcap = 2.5f;  // small, so the cap bends logits
    const size_t n = 31, width = a.n_head * a.head_dim;
    const std::vector<float> q = randoms(n * width, 5, 2.0f), k = randoms(n * width, 6, 2.0f);
    const std::vector<float> v = randoms(n * width, 7), rel = randoms(a.window * width, 8);
    const std::vector<float> qs = randoms(a.head_dim, 9);
    const Tensor out = zeros(width, n);
    be_->attention_local(out, f32(q, width), f32(k, width), f32(v, width), f32(rel, width), f32(qs, a.head_dim), a);
    std::vector<float> want(n * width);
    for (size_t t = 0; t < n; ++t) {
        local_attention_row_ref(want.data() + t * width, q.data(), k.data(), v.data(), rel.data(), qs.data(), t, a);
    }
    EXPECT_LE(worst_abs(get(out), want), 1e-5f);
    // Row 0 sees only itself: its output is its own value row.
    for (size_t i = 0; i < width; ++i) EXPECT_NEAR(want[i], v[i], 1e-6f);
}

TEST_P(ConformerOps, BadShapesAreErrors) {
    const Tensor a = zeros(6, 4), b = zeros(4, 6), w = zeros(5, 4);
    EXPECT_THROW(be_->clamp(a, a, 1.0f, -1.0f), Error);
    EXPECT_THROW(be_->transpose(a, a), Error);
    EXPECT_THROW(be_->depthwise_conv(a, a, w), Error);  // 4 tap rows for 6 channels
    LocalAttention la;
    la.n_head = 2;
    la.head_dim = 3;
    la.window = 2;
    la.softcap = 50.0f;
    EXPECT_THROW(be_->attention_local(a, a, a, a, b, zeros(3, 1), la), Error);
    EXPECT_THROW(be_->gelu(a, a, Activation::SIGMOID), Error);
}

// The devices of this build and machine, plus cuda:0 (reported skipped with the reason when absent).
std::vector<std::string> conformer_devices() {
    std::vector<std::string> devices = available_devices();
    if (std::find(devices.begin(), devices.end(), "cuda:0") == devices.end()) devices.push_back("cuda:0");
    return devices;
}

std::string conformer_device_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), ':', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, ConformerOps, ::testing::ValuesIn(conformer_devices()), conformer_device_name);

}  // namespace
}  // namespace cactus
