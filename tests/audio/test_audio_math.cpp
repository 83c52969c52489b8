// Log-mel front end and dense attention through the GEMM kernels, against direct computations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu_backend.h"
#include "core/error.h"
#include "models/audio/log_mel.h"
#include "models/audio/whisper_transcribe.h"

namespace cactus {
namespace {

// One triangle per mel bin over bins [m, m + 3): enough to check framing and scaling.
std::vector<float> toy_filters(size_t n_mels) {
    std::vector<float> f(n_mels * kMelBins, 0.0f);
    for (size_t m = 0; m < n_mels; ++m) f[m * kMelBins + m * 2 + 1] = 1.0f;
    return f;
}

TEST(LogMel, FrameCountAndRangeFollowWhisper) {
    std::vector<float> x(16000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * std::sin(2 * M_PI * 1000.0 * i / 16000.0);
    const LogMel mel = log_mel(x.data(), x.size(), toy_filters(80), 80);
    EXPECT_EQ(mel.n_frames, 16000u / 160 + 1);
    float max = -1e9f, min = 1e9f;
    for (float v : mel.data) {
        max = std::max(max, v);
        min = std::min(min, v);
    }
    EXPECT_LE(max - min, 2.0f + 1e-5f);  // the floor at max - 8 (log10), scaled by 1/4
    // 1 kHz sits in FFT bin 25: the filter that reads bin 25 (mel 12) is the loudest.
    const float* mid = mel.data.data() + 50 * 80;
    size_t best = 0;
    for (size_t m = 1; m < 80; ++m)
        if (mid[m] > mid[best]) best = m;
    EXPECT_EQ(best, 12u);
}

TEST(LogMel, MatchesADirectDftOnOneFrame) {
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.0f, 0.1f);
    std::vector<float> x(4000);
    for (float& v : x) v = g(rng);
    const std::vector<float> filters = toy_filters(80);
    const LogMel mel = log_mel(x.data(), x.size(), filters, 80);
    const size_t t = 10;  // frame 10 starts at sample 10 * 160 - 200 (inside the signal)
    std::vector<double> power(kMelBins);
    for (size_t k = 0; k < kMelBins; ++k) {
        double re = 0, im = 0;
        for (size_t n = 0; n < kMelFft; ++n) {
            const double w = 0.5 - 0.5 * std::cos(2 * M_PI * n / kMelFft);
            const double s = x[t * kMelHop - kMelFft / 2 + n] * w;
            re += s * std::cos(2 * M_PI * k * n / kMelFft);
            im -= s * std::sin(2 * M_PI * k * n / kMelFft);
        }
        power[k] = re * re + im * im;
    }
    float max_log = -1e9f;
    for (float v : mel.data) max_log = std::max(max_log, v * 4.0f - 4.0f);
    for (size_t m = 0; m < 80; ++m) {
        double want = std::log10(std::max(power[m * 2 + 1], 1e-10));
        want = (std::max(want, static_cast<double>(max_log) - 8.0) + 4.0) / 4.0;
        EXPECT_NEAR(mel.data[t * 80 + m], want, 1e-4) << m;
    }
}

TEST(LogMel, RejectsBadFilters) {
    std::vector<float> x(1000, 0.0f);
    EXPECT_THROW(log_mel(x.data(), x.size(), std::vector<float>(10), 80), Error);
}

TEST(Whisper, CompressionRatioSeesRepetition) {
    EXPECT_LT(compression_ratio("The quick brown fox jumps over the lazy dog."), 1.5f);
    std::string rep;
    for (int i = 0; i < 40; ++i) rep += "I am here. ";
    EXPECT_GT(compression_ratio(rep), 2.4f);
}

// attention_dense through the GEMM kernels vs the row loop, odd sizes, GQA, causal and masked.
TEST(DenseAttention, GemmPathMatchesTheRowLoop) {
    CpuBackend be(2);
    std::mt19937 rng(3);
    std::normal_distribution<float> g(0.0f, 1.0f);
    struct Case {
        size_t n_q, n_kv, n_head, n_head_kv, hd;
        bool causal;
        bool mask;
    };
    for (const Case c : {Case{37, 53, 6, 6, 64, false, false}, Case{20, 20, 4, 2, 32, true, false},
                         Case{17, 40, 3, 1, 24, true, true}, Case{64, 1500 / 10, 8, 8, 64, false, true}}) {
        auto make = [&](size_t w, size_t r) {
            auto buf = be.alloc(w * r * 4);
            Tensor t = make_tensor(buf.get(), 0, DType::F32, w, r);
            for (size_t i = 0; i < w * r; ++i) t.as<float>()[i] = g(rng);
            return std::make_pair(std::move(buf), t);
        };
        auto q = make(c.n_head * c.hd, c.n_q), k = make(c.n_head_kv * c.hd, c.n_kv),
             v = make(c.n_head_kv * c.hd, c.n_kv);
        auto o1 = make(c.n_head * c.hd, c.n_q), o2 = make(c.n_head * c.hd, c.n_q), m = make(c.n_kv, c.n_q);
        for (size_t i = 0; i < c.n_kv * c.n_q; ++i) m.second.as<float>()[i] = (i % 7 == 0) ? -INFINITY : 0.0f;
        DenseAttention s;
        s.n_head = c.n_head;
        s.n_head_kv = c.n_head_kv;
        s.head_dim = s.head_dim_v = c.hd;
        s.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
        s.causal = c.causal;
        const Tensor mask = c.mask ? m.second : Tensor();
        be.force_dense_rows(true);
        be.attention_dense(o1.second, q.second, k.second, v.second, mask, s);
        be.force_dense_rows(false);
        be.attention_dense_gemm(o2.second, q.second, k.second, v.second, mask, s);
        for (size_t i = 0; i < c.n_q * c.n_head * c.hd; ++i) {
            ASSERT_NEAR(o1.second.as<float>()[i], o2.second.as<float>()[i], 1e-4f) << i;
        }
    }
}

}  // namespace
}  // namespace cactus
