// Log-mel front end, dense attention and the encoder matmul through the GEMM kernels, against
// direct computations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/media/whisper_transcribe.h"
#include "models/audio/log_mel.h"
#include "ops/quant.h"

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

// Few queries without mask or causality (decode's cross-attention) skip the row loop: same result
// up to summation order.
TEST(DenseAttention, FewQueriesMatchTheRowLoop) {
    CpuBackend be(2);
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    struct Case {
        size_t n_q, n_kv, n_head, n_head_kv, hd;
    };
    for (const Case c :
         {Case{1, 1500 / 4, 6, 6, 64}, Case{5, 7, 4, 2, 13}, Case{15, 1, 3, 1, 24}, Case{2, 33, 2, 2, 100}}) {
        auto make = [&](size_t w, size_t r) {
            auto buf = be.alloc(w * r * 4);
            Tensor t = make_tensor(buf.get(), 0, DType::F32, w, r);
            for (size_t i = 0; i < w * r; ++i) t.as<float>()[i] = g(rng);
            return std::make_pair(std::move(buf), t);
        };
        auto q = make(c.n_head * c.hd, c.n_q), k = make(c.n_head_kv * c.hd, c.n_kv),
             v = make(c.n_head_kv * c.hd, c.n_kv);
        auto o1 = make(c.n_head * c.hd, c.n_q), o2 = make(c.n_head * c.hd, c.n_q);
        DenseAttention s;
        s.n_head = c.n_head;
        s.n_head_kv = c.n_head_kv;
        s.head_dim = s.head_dim_v = c.hd;
        s.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
        be.force_dense_rows(true);
        be.attention_dense(o1.second, q.second, k.second, v.second, Tensor(), s);
        be.force_dense_rows(false);
        be.attention_dense(o2.second, q.second, k.second, v.second, Tensor(), s);
        for (size_t i = 0; i < c.n_q * c.n_head * c.hd; ++i) {
            ASSERT_NEAR(o1.second.as<float>()[i], o2.second.as<float>()[i], 1e-5f) << i;
        }
    }
}

// conv1d over many frames (Whisper's stem) takes the dense_gemm path for F16 weights: against a
// direct sum in double.
TEST(Conv1d, ManyFramesF16MatchesADirectSum) {
    CpuBackend be(2);
    std::mt19937 rng(13);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const size_t n_t = 51, n_in = 9, n_out = 19, kernel = 3;
    for (const size_t stride : {size_t{1}, size_t{2}}) {
        const size_t n_t_out = (n_t + 2 - kernel) / stride + 1;
        auto xb = be.alloc(n_t * n_in * 4), wb = be.alloc(n_out * n_in * kernel * 2), bb = be.alloc(n_out * 4),
             yb = be.alloc(n_t_out * n_out * 4);
        const Tensor x = make_tensor(xb.get(), 0, DType::F32, n_in, n_t);
        const Tensor w = make_tensor(wb.get(), 0, DType::F16, n_in * kernel, n_out);
        const Tensor b = make_tensor(bb.get(), 0, DType::F32, n_out, 1);
        const Tensor y = make_tensor(yb.get(), 0, DType::F32, n_out, n_t_out);
        std::vector<float> wf(n_out * n_in * kernel);
        for (float& v : wf) v = fp16_to_fp32(fp32_to_fp16(g(rng)));
        for (size_t i = 0; i < wf.size(); ++i) static_cast<uint16_t*>(w.data())[i] = fp32_to_fp16(wf[i]);
        for (size_t i = 0; i < n_t * n_in; ++i) x.as<float>()[i] = g(rng);
        for (size_t o = 0; o < n_out; ++o) b.as<float>()[o] = g(rng);
        Conv1d c;
        c.kernel = kernel;
        c.stride = stride;
        c.pad = 1;
        be.conv1d(y, x, w, b, c);
        for (size_t t = 0; t < n_t_out; ++t) {
            for (size_t o = 0; o < n_out; ++o) {
                double want = b.as<float>()[o];
                for (size_t ch = 0; ch < n_in; ++ch) {
                    for (size_t k = 0; k < kernel; ++k) {
                        const long src = static_cast<long>(t * stride + k) - 1;
                        if (src < 0 || src >= static_cast<long>(n_t)) continue;
                        want += double(wf[o * n_in * kernel + ch * kernel + k]) * x.as<float>()[src * n_in + ch];
                    }
                }
                ASSERT_NEAR(y.as<float>()[t * n_out + o], want, 1e-4)
                    << "stride " << stride << " (" << t << ", " << o << ")";
            }
        }
    }
}

// matmul_encoder: from kDenseGemmMinQueries rows, F16 and F32 weights go through dense_gemm (one
// fma chain per element over the widened weights, bit for bit); fewer rows, or a quantized type,
// are exactly matmul.
TEST(MatmulEncoder, DenseForManyRowsMatmulOtherwise) {
    CpuBackend be(3);
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const size_t n_out = 37;
    for (const DType type : {DType::F16, DType::F32, DType::Q8_0}) {
        const size_t n_in = type == DType::Q8_0 ? 96 : 72;  // 72: not a multiple of the 32-wide tile chunks
        for (const size_t n : {size_t{5}, CpuBackend::kDenseGemmMinQueries, size_t{41}}) {
            std::vector<float> wf(n_out * n_in), xf(n * n_in);
            for (float& v : wf) v = g(rng);
            for (float& v : xf) v = g(rng);
            const size_t row_bytes = dtype_row_bytes(type, n_in);
            auto wb = be.alloc(row_bytes * n_out), xb = be.alloc(xf.size() * 4), y1b = be.alloc(n * n_out * 4),
                 y2b = be.alloc(n * n_out * 4);
            Tensor w = make_tensor(wb.get(), 0, type, n_in, n_out);
            for (size_t o = 0; o < n_out; ++o) {
                quantize_row_ref(type, static_cast<uint8_t*>(w.data()) + o * row_bytes, wf.data() + o * n_in, n_in);
                dequantize_row_ref(type, wf.data() + o * n_in, static_cast<uint8_t*>(w.data()) + o * row_bytes, n_in);
            }
            const Tensor x = make_tensor(xb.get(), 0, DType::F32, n_in, n);
            std::copy(xf.begin(), xf.end(), x.as<float>());
            const Tensor y1 = make_tensor(y1b.get(), 0, DType::F32, n_out, n);
            const Tensor y2 = make_tensor(y2b.get(), 0, DType::F32, n_out, n);
            be.matmul_encoder(y1, w, x);
            be.matmul(y2, w, x);
            const bool dense = n >= CpuBackend::kDenseGemmMinQueries && type != DType::Q8_0;
            for (size_t t = 0; t < n; ++t) {
                for (size_t o = 0; o < n_out; ++o) {
                    float ref = 0.0f;
                    for (size_t i = 0; i < n_in; ++i) ref = std::fma(xf[t * n_in + i], wf[o * n_in + i], ref);
                    const float got = y1.as<float>()[t * n_out + o];
                    ASSERT_EQ(got, dense ? ref : y2.as<float>()[t * n_out + o])
                        << dtype_name(type) << " n=" << n << " at (" << t << ", " << o << ")";
                }
            }
        }
    }
    // Shapes that do not fit are refused like matmul's.
    auto b = be.alloc(64 * 64 * 4);
    EXPECT_THROW(
        be.matmul_encoder(make_tensor(b.get(), 0, DType::F32, 8, 20), make_tensor(b.get(), 0, DType::F32, 16, 8),
                          make_tensor(b.get(), 0, DType::F32, 15, 20)),
        Error);
}

}  // namespace
}  // namespace cactus
