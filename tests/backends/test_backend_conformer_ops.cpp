// The conformer ops (clamp, transpose, depthwise_conv, attention_local, glu's sigmoid, gelu's silu) of every
// backend against their scalar references (src/ops/conformer_ref.h) on random data of odd sizes.
// Bounds: clamp and transpose bit for bit (NaN, infinities and -0 included); depthwise_conv bit for
// bit (the references are compiled without FMA contraction and the kernels round each product and
// sum as written); sigmoid glu 1e-6 and silu 1e-5 of the input scale (exp's last bits); the attention
// 1e-5 of the output scale (tanh, exp and the order of its sums).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
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

// Elements whose bits differ (NaN equals NaN of the same bits; -0 differs from +0).
size_t bit_differences(const std::vector<float>& got, const std::vector<float>& want) {
    size_t n = got.size() == want.size() ? 0 : 1;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) n += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    return n;
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
    std::vector<float> a = randoms(n * width, 1, 3.0f);
    const std::vector<float> b = randoms(n * width, 2, 3.0f);
    // Edge values for clamp: NaN passes through, -0 stays -0 (ReLU too), the bounds themselves, infinities.
    const float edges[] = {NAN, -0.0f, 0.0f, -1.25f, 0.75f, INFINITY, -INFINITY, -NAN};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) a[i * 31] = edges[i];
    std::vector<float> want(a.size());
    const Tensor y = zeros(width, n);
    be_->clamp(y, f32(a, width), -1.25f, 0.75f);
    clamp_ref(want.data(), a.data(), a.size(), -1.25f, 0.75f);
    EXPECT_EQ(bit_differences(get(y), want), 0u) << "clamp";
    be_->clamp(y, f32(a, width), 0.0f, INFINITY);
    clamp_ref(want.data(), a.data(), a.size(), 0.0f, INFINITY);
    EXPECT_EQ(bit_differences(get(y), want), 0u) << "relu";
    const Tensor x_in_place = f32(a, width);
    be_->clamp(x_in_place, x_in_place, -1.25f, 0.75f);
    clamp_ref(want.data(), a.data(), a.size(), -1.25f, 0.75f);
    EXPECT_EQ(bit_differences(get(x_in_place), want), 0u) << "clamp in place";
    // Transposes within one 32 x 32 tile's width and across several tiles both ways.
    for (size_t rows : {n, size_t(75)}) {
        for (size_t cols : {width, size_t(67)}) {
            const std::vector<float> x = randoms(rows * cols, 10 + rows + cols, 3.0f);
            const Tensor yt = zeros(rows, cols);
            be_->transpose(yt, f32(x, cols));
            std::vector<float> want_t(x.size());
            transpose_ref(want_t.data(), x.data(), rows, cols);
            EXPECT_EQ(bit_differences(get(yt), want_t), 0u) << "transpose of [" << rows << ", " << cols << "]";
        }
    }
    a = randoms(n * width, 1, 3.0f);
    be_->glu(y, f32(a, width), f32(b, width), Activation::SIGMOID);
    sigmoid_glu_ref(want.data(), a.data(), b.data(), a.size());
    EXPECT_LE(worst_abs(get(y), want), 1e-6f * 3.0f) << "sigmoid glu";
    be_->gelu(y, f32(a, width), Activation::SILU);
    for (size_t i = 0; i < a.size(); ++i) want[i] = silu_ref(a[i]);
    EXPECT_LE(worst_abs(get(y), want), 1e-5f * 3.0f) << "silu";
}

TEST_P(ConformerOps, CausalDepthwiseConv) {
    struct Case {
        size_t n, width, kernel;
    };
    // Kernel 1; Gemma 4's kernel 5 over rows before and after it fills; a kernel longer than the input.
    for (const Case c : {Case{29, 19, 1}, Case{29, 19, 5}, Case{3, 300, 7}}) {
        const std::vector<float> x = randoms(c.n * c.width, 3), w = randoms(c.width * c.kernel, 4);
        const Tensor y = zeros(c.width, c.n);
        be_->depthwise_conv(y, f32(x, c.width), f32(w, c.kernel));
        std::vector<float> want(x.size());
        for (size_t t = 0; t < c.n; ++t)
            causal_depthwise_conv_row_ref(want.data() + t * c.width, x.data(), w.data(), t, c.width, c.kernel);
        EXPECT_EQ(bit_differences(get(y), want), 0u) << "n " << c.n << ", kernel " << c.kernel;
    }
    // The reference itself: row 0 of a kernel-5 convolution sees only its last tap.
    const std::vector<float> x = {2.0f}, w = {1, 1, 1, 1, 0.5f};
    float y0 = 0.0f;
    causal_depthwise_conv_row_ref(&y0, x.data(), w.data(), 0, 1, 5);
    EXPECT_EQ(y0, 1.0f);
}

LocalAttention local_attention(size_t n_head, size_t head_dim, size_t window, float k_scale, float softcap) {
    LocalAttention a;
    a.n_head = n_head;
    a.head_dim = head_dim;
    a.window = window;
    a.k_scale = k_scale;
    a.softcap = softcap;
    return a;
}

TEST_P(ConformerOps, LocalAttentionWithRelativeKeys) {
    struct Case {
        size_t n;
        LocalAttention a;
    };
    const Case cases[] = {
        {31, local_attention(3, 7, 5, 1.3f, 2.5f)},      // small softcap, so the cap bends logits
        {17, local_attention(2, 33, 40, 1.3f, 2.5f)},    // a window wider than the input; head_dim > 32 lanes
        {9, local_attention(1, 129, 1, 1.3f, 2.5f)},     // window 1: each row sees only itself
        {50, local_attention(4, 64, 12, 1.44f, 50.0f)},  // Gemma 4's window and softcap
        {3, local_attention(1, 12300, 3, 1.3f, 2.5f)},   // too wide for a CUDA block's shared memory
    };
    for (const Case& c : cases) {
        const LocalAttention& a = c.a;
        const size_t n = c.n, width = a.n_head * a.head_dim;
        const std::vector<float> q = randoms(n * width, 5, 2.0f), k = randoms(n * width, 6, 2.0f);
        const std::vector<float> v = randoms(n * width, 7), rel = randoms(a.window * width, 8);
        const std::vector<float> qs = randoms(a.head_dim, 9);
        const Tensor out = zeros(width, n);
        be_->attention_local(out, f32(q, width), f32(k, width), f32(v, width), f32(rel, width), f32(qs, a.head_dim), a);
        std::vector<float> want(n * width);
        for (size_t t = 0; t < n; ++t) {
            local_attention_row_ref(want.data() + t * width, q.data(), k.data(), v.data(), rel.data(), qs.data(), t, a);
        }
        const std::vector<float> got = get(out);
        EXPECT_LE(worst_abs(got, want), 1e-5f)
            << n << " rows, " << a.n_head << " heads of " << a.head_dim << ", window " << a.window;
        // Row 0 (every row with window 1) sees only itself: its output is its own value row.
        const size_t rows_alone = a.window == 1 ? n : 1;
        for (size_t i = 0; i < rows_alone * width; ++i) ASSERT_NEAR(got[i], v[i], 1e-6f) << "element " << i;
    }
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
    // The kernels read x while they write y: in place or overlapping is an error, not a race.
    const Tensor square = zeros(5, 5), taps = zeros(3, 5);
    EXPECT_THROW(be_->transpose(square, square), Error);
    EXPECT_THROW(be_->depthwise_conv(square, square, taps), Error);
    la.window = 1;
    const Tensor qkv = zeros(6, 3), rel = zeros(6, 1);
    EXPECT_THROW(be_->attention_local(qkv, qkv, zeros(6, 3), zeros(6, 3), rel, zeros(3, 1), la), Error);
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
