// Optimised CPU ops (src/backends/cpu/ops_cpu.h) vs the scalar references (src/ops/ops_ref.h) on
// random data of odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/ops_cpu.h"
#include "ops/ops_ref.h"

namespace cactus {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Normalised mean squared error of `got` against `want`.
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        err += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
        ref += want[i] * static_cast<double>(want[i]);
    }
    return ref > 0.0 ? err / ref : err;
}

TEST(OpsCpu, RmsNormMatchesReference) {
    std::mt19937 rng(1);
    for (size_t n : {1, 7, 63, 577, 1031}) {
        auto x = random_vector(n, rng, 3.0f);
        auto w = random_vector(n, rng);
        std::vector<float> want(n), got(n);
        rms_norm_ref(want.data(), x.data(), w.data(), n, 1e-6f);
        rms_norm(got.data(), x.data(), w.data(), n, 1e-6f);
        EXPECT_LT(nmse(got, want), 1e-10) << n;
        double ms = 0.0;  // the unweighted norm has unit mean square
        rms_norm(got.data(), x.data(), nullptr, n, 0.0f);
        for (float v : got) ms += v * static_cast<double>(v);
        EXPECT_NEAR(ms / n, 1.0, 1e-4);
    }
}

TEST(OpsCpu, RopeBothStylesMatchReference) {
    std::mt19937 rng(2);
    for (RopeStyle style : {RopeStyle::NORMAL, RopeStyle::NEOX}) {
        for (size_t head_dim : {2, 6, 64, 258}) {
            for (size_t n_rot : {head_dim, head_dim / 2 * 2 > 2 ? head_dim - 2 : head_dim}) {
                RopeParams p{style, n_rot, 10000.0f, 1.0f};
                for (int32_t pos : {0, 1, 17, 4099}) {
                    auto x = random_vector(3 * head_dim, rng);
                    auto want = x;
                    rope_ref(want.data(), 3, head_dim, pos, p);
                    rope(x.data(), 3, head_dim, pos, p);
                    EXPECT_LT(nmse(x, want), 1e-10);
                }
            }
        }
    }
}

TEST(OpsCpu, RopeStylesPairDifferentDimensions) {
    // NORMAL rotates (0,1); NEOX rotates (0, n_rot/2). At pos 1 with a unit vector on dim 1 the
    // styles must differ; at pos 0 both are the identity.
    std::vector<float> a(8, 0.0f), b(8, 0.0f);
    a[1] = b[1] = 1.0f;
    rope_ref(a.data(), 1, 8, 1, {RopeStyle::NORMAL, 8, 10000.0f, 1.0f});
    rope_ref(b.data(), 1, 8, 1, {RopeStyle::NEOX, 8, 10000.0f, 1.0f});
    EXPECT_NEAR(a[0], -std::sin(1.0f), 1e-6);
    EXPECT_NEAR(b[0], 0.0f, 1e-7);
    EXPECT_NEAR(b[5], std::sin(std::pow(10000.0, -2.0 / 8)), 1e-6);  // pair (1, 5)
}

TEST(OpsCpu, SoftmaxMatchesReference) {
    std::mt19937 rng(3);
    for (size_t n : {1, 5, 129, 1001}) {
        auto x = random_vector(n, rng, 10.0f);
        auto want = x;
        softmax_ref(want.data(), n);
        softmax(x.data(), n);
        EXPECT_LT(nmse(x, want), 1e-10);
        double sum = 0.0;
        for (float v : x) sum += v;
        EXPECT_NEAR(sum, 1.0, 1e-5);
    }
}

TEST(OpsCpu, GatedActivationsMatchReference) {
    std::mt19937 rng(4);
    for (size_t n : {1, 13, 2049}) {
        auto g = random_vector(n, rng, 4.0f);
        auto u = random_vector(n, rng);
        std::vector<float> want(n), got(n);
        swiglu_ref(want.data(), g.data(), u.data(), n);
        swiglu(got.data(), g.data(), u.data(), n);
        EXPECT_LT(nmse(got, want), 1e-10);
        geglu_ref(want.data(), g.data(), u.data(), n);
        geglu(got.data(), g.data(), u.data(), n);
        EXPECT_LT(nmse(got, want), 1e-10);
    }
    EXPECT_NEAR(gelu_tanh_ref(1.0f), 0.841192f, 1e-5);
    EXPECT_NEAR(silu_ref(1.0f), 0.731059f, 1e-5);
}

TEST(OpsCpu, HalfConversionRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = half_to_float_ref(static_cast<uint16_t>(h));
        EXPECT_EQ(half_to_float(static_cast<uint16_t>(h)) == f || std::isnan(f), true);
        if (!std::isnan(f)) {
            EXPECT_EQ(float_to_half_ref(f), h) << h;
        }
    }
    EXPECT_EQ(float_to_half_ref(1.0f), 0x3c00);
    EXPECT_EQ(float_to_half_ref(1e6f), 0x7c00);
    EXPECT_EQ(float_to_half_ref(1.0f + 1.0f / 4096.0f), 0x3c00);  // ties to even
}

// Attention over rows with GQA-like strides, shuffled positions, a window and empty rows.
TEST(OpsCpu, AttentionMatchesReferenceWithWindowAndGaps) {
    std::mt19937 rng(5);
    for (size_t head_dim : {3, 64, 129}) {
        for (uint32_t window : {0u, 1u, 5u, 512u}) {
            const size_t n_rows = 37, n_kv_heads = 2, stride = n_kv_heads * head_dim;
            std::vector<uint16_t> k(n_rows * stride), v(n_rows * stride);
            for (size_t i = 0; i < k.size(); ++i) {
                k[i] = float_to_half_ref(random_vector(1, rng)[0]);
                v[i] = float_to_half_ref(random_vector(1, rng)[0]);
            }
            std::vector<int32_t> pos(n_rows);
            for (size_t r = 0; r < n_rows; ++r) pos[r] = (r % 9 == 4) ? -1 : static_cast<int32_t>((r * 7) % n_rows);
            auto q = random_vector(head_dim, rng);
            std::vector<float> want(head_dim), got(head_dim);
            AttentionWorkspace scratch;
            for (int32_t q_pos : {0, 10, 36}) {
                AttentionMask mask{q_pos, window};
                attention_head_ref(want.data(), q.data(), k.data() + head_dim, stride, v.data() + head_dim, stride,
                                   pos.data(), n_rows, head_dim, head_dim, 0.3f, mask);
                attention_head(got.data(), q.data(), k.data() + head_dim, stride, v.data() + head_dim, stride,
                               pos.data(), n_rows, head_dim, head_dim, 0.3f, mask, scratch);
                EXPECT_LT(nmse(got, want), 1e-9) << head_dim << " " << window << " " << q_pos;
            }
        }
    }
}

TEST(OpsCpu, AttentionWithOneVisibleRowReturnsItsValue) {
    std::vector<uint16_t> k = {float_to_half_ref(1.0f), float_to_half_ref(2.0f)};
    std::vector<uint16_t> v = {float_to_half_ref(5.0f), float_to_half_ref(-3.0f)};
    std::vector<int32_t> pos = {0, 1};
    float q = 1.0f, out = 0.0f;
    AttentionWorkspace scratch;
    attention_head(&out, &q, k.data(), 1, v.data(), 1, pos.data(), 2, 1, 1, 1.0f, {1, 1}, scratch);
    EXPECT_FLOAT_EQ(out, -3.0f);  // window 1: only the query's own position
    attention_head(&out, &q, k.data(), 1, v.data(), 1, pos.data(), 2, 1, 1, 1.0f, {0, 0}, scratch);
    EXPECT_FLOAT_EQ(out, 5.0f);  // causal: position 1 is in the future
}

}  // namespace
}  // namespace cactus
