// Every op of every backend against the scalar reference (src/ops/) on random data of odd sizes,
// in the spirit of ggml's test-backend-ops. A backend that is not usable here (no GPU) is reported
// as skipped with the reason. Error bounds (max abs error relative to the reference's scale) are
// stated per op: f32 element-wise ops and norms 1e-5; matmul by the weight type's activation
// quantization (f32/f16 weights 1e-4, quantized 2e-2 of the row's |w|.|x|); attention over the KV
// cache 2e-3 with f16 rows (keys, values, queries and weights rounded to f16, as the KV path does),
// 1e-4 with int8 rows, 1e-5 with f32 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend_test_util.h"
#include "backends/backend.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "ops/conformer_ref.h"
#include "ops/ops_ref.h"
#include "ops/quant.h"

namespace cactus {
namespace {

using testing::hold;
using testing::hold_f32;
using testing::worst_error;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

float max_abs(const std::vector<float>& v) {
    float m = 0.0f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const float scale = std::max(1.0f, max_abs(want));
    float worst = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const float d = std::fabs(got[i] - want[i]);
        if (!(d <= worst)) {  // NaN counts as worst
            worst = d;
            at = i;
        }
    }
    EXPECT_LE(worst, tol * scale) << what << ": element " << at << " is " << got[at] << ", reference " << want[at];
}

// A backend under test, with helpers that put host data into its memory.
class BackendOps : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        try {
            be_ = make_backend(BackendOptions{GetParam(), 2});
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
    Tensor i32(const std::vector<int32_t>& host) {
        buffers_.push_back(be_->alloc(host.size() * sizeof(int32_t)));
        const Tensor t = make_tensor(buffers_.back().get(), 0, DType::I32, 1, host.size());
        be_->upload(t, host.data(), host.size() * sizeof(int32_t));
        return t;
    }
    Tensor zeros(size_t width, size_t rows) { return f32(std::vector<float>(width * rows, 0.0f), width); }
    // W [rows, width] of `type` from random floats: the placed weight and its dequantized values.
    Tensor weight(DType type, size_t width, size_t rows, uint32_t seed, std::vector<float>* dequantized) {
        const std::vector<float> w = random_floats(width * rows, seed);
        const size_t row_bytes = dtype_row_bytes(type, width);
        host_weights_.emplace_back(row_bytes * rows);
        std::vector<uint8_t>& bytes = host_weights_.back();
        dequantized->resize(width * rows);
        for (size_t r = 0; r < rows; ++r) {
            if (type == DType::F32) {
                std::memcpy(bytes.data() + r * row_bytes, w.data() + r * width, row_bytes);
            } else {
                quantize_row_ref(type, bytes.data() + r * row_bytes, w.data() + r * width, width);
            }
            dequantize_row_ref(type, dequantized->data() + r * width, bytes.data() + r * row_bytes, width);
        }
        return be_->place_weight(bytes.data(), type, width, rows);
    }
    std::vector<float> get(const Tensor& t) {
        be_->synchronize(std::chrono::milliseconds(30000));
        return download_f32(*be_, t);
    }

    std::unique_ptr<Backend> be_;
    std::vector<std::unique_ptr<Buffer>> buffers_;
    std::vector<std::vector<uint8_t>> host_weights_;  // must outlive the placed weights
};

TEST_P(BackendOps, RmsNormAndLayerNorm) {
    const size_t rows = 13, width = 67;
    const std::vector<float> x = random_floats(rows * width, 1, 3.0f);
    const std::vector<float> w = random_floats(width, 2);
    const std::vector<float> b = random_floats(width, 3);
    std::vector<float> want(x.size());
    for (size_t r = 0; r < rows; ++r) rms_norm_ref(&want[r * width], &x[r * width], w.data(), width, 1e-6f);
    const Tensor y = zeros(width, rows);
    be_->rms_norm(y, f32(x, width), f32(w, width), 1e-6f);
    expect_close(get(y), want, 1e-5f, "rms_norm");
    for (size_t r = 0; r < rows; ++r) layer_norm_ref(&want[r * width], &x[r * width], w.data(), b.data(), width, 1e-5f);
    be_->layer_norm(y, f32(x, width), f32(w, width), f32(b, width), 1e-5f);
    expect_close(get(y), want, 1e-5f, "layer_norm");
}

TEST_P(BackendOps, ElementWise) {
    const size_t rows = 7, width = 37;
    const std::vector<float> a = random_floats(rows * width, 4, 4.0f);
    const std::vector<float> b = random_floats(rows * width, 5, 4.0f);
    const std::vector<float> bias = random_floats(width, 6);
    const Tensor y = zeros(width, rows);
    std::vector<float> want(a.size());
    be_->add(y, f32(a, width), f32(b, width));
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];
    expect_close(get(y), want, 1e-6f, "add");
    be_->add(y, f32(a, width), f32(bias, width));
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + bias[i % width];
    expect_close(get(y), want, 1e-6f, "add (bias broadcast)");
    be_->scale(y, f32(a, width), 0.37f);
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] * 0.37f;
    expect_close(get(y), want, 1e-6f, "scale");
    be_->softcap(y, f32(a, width), 3.0f);
    for (size_t i = 0; i < a.size(); ++i) want[i] = 3.0f * std::tanh(a[i] / 3.0f);
    expect_close(get(y), want, 1e-5f, "softcap");
    be_->gelu(y, f32(a, width), Activation::GELU_TANH);
    for (size_t i = 0; i < a.size(); ++i) want[i] = gelu_tanh_ref(a[i]);
    expect_close(get(y), want, 1e-5f, "gelu (tanh)");
    be_->gelu(y, f32(a, width), Activation::GELU_ERF);
    for (size_t i = 0; i < a.size(); ++i) want[i] = 0.5f * a[i] * (1.0f + std::erf(a[i] / std::sqrt(2.0f)));
    expect_close(get(y), want, 1e-5f, "gelu (erf)");
    be_->glu(y, f32(a, width), f32(b, width), Activation::SILU);
    swiglu_ref(want.data(), a.data(), b.data(), a.size());
    expect_close(get(y), want, 1e-5f, "swiglu");
    be_->glu(y, f32(a, width), f32(b, width), Activation::GELU_TANH);
    geglu_ref(want.data(), a.data(), b.data(), a.size());
    expect_close(get(y), want, 1e-5f, "geglu");
}

TEST_P(BackendOps, GetRowsEveryTableType) {
    for (DType type : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        const size_t width = 256, rows = 11;
        std::vector<float> table_values;
        const Tensor table = weight(type, width, rows, 7, &table_values);
        const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
        const Tensor y = zeros(width, ids.size());
        be_->get_rows(y, table, i32(ids), 2.0f);
        std::vector<float> want;
        for (int32_t id : ids) {
            for (size_t i = 0; i < width; ++i) want.push_back(table_values[id * width + i] * 2.0f);
        }
        expect_close(get(y), want, 1e-6f, dtype_name(type));
    }
    const Tensor table = f32(random_floats(4 * 8, 8), 8);
    // An id past the table: the CPU throws at once; a GPU checks ids in the kernel (they live in
    // device memory) and throws at the next synchronize.
    EXPECT_THROW(
        {
            be_->get_rows(zeros(8, 1), table, i32({4}), 1.0f);
            be_->synchronize(std::chrono::seconds(10));
        },
        Error);
}

TEST_P(BackendOps, MatmulEveryWeightType) {
    struct Case {
        DType type;
        float tol;
    };
    for (const Case c : {Case{DType::F32, 1e-4f}, Case{DType::F16, 1e-3f}, Case{DType::Q4_0, 2e-2f},
                         Case{DType::Q4_1, 2e-2f}, Case{DType::Q5_0, 2e-2f}, Case{DType::Q8_0, 2e-2f},
                         Case{DType::Q4_K, 2e-2f}, Case{DType::Q5_K, 2e-2f}, Case{DType::Q6_K, 2e-2f}}) {
        const size_t n_in = 512, n_out = 37;
        for (size_t n_tok : {1, 3, 17}) {
            std::vector<float> w_values;
            const Tensor w = weight(c.type, n_in, n_out, 9, &w_values);
            const std::vector<float> x = random_floats(n_tok * n_in, 10);
            std::vector<float> want(n_tok * n_out);
            for (size_t t = 0; t < n_tok; ++t) {
                for (size_t o = 0; o < n_out; ++o) {
                    double acc = 0.0;
                    for (size_t i = 0; i < n_in; ++i)
                        acc += static_cast<double>(w_values[o * n_in + i]) * x[t * n_in + i];
                    want[t * n_out + o] = static_cast<float>(acc);
                }
            }
            const Tensor y = zeros(n_out, n_tok);
            be_->matmul(y, w, f32(x, n_in));
            // |w . x| ~ sqrt(n_in) / 3 here: the bound scales with the reference's magnitude.
            expect_close(get(y), want, c.tol * std::sqrt(static_cast<float>(n_in)),
                         (std::string(dtype_name(c.type)) + " x " + std::to_string(n_tok)).c_str());
        }
    }
}

TEST_P(BackendOps, RopeBothStylesAtScatteredPositions) {
    for (RopeStyle style : {RopeStyle::NORMAL, RopeStyle::NEOX}) {
        const size_t n = 9, n_head = 3, head_dim = 34;
        const RopeParams params = {style, 30, 10000.0f, 0.5f};
        const std::vector<float> x = random_floats(n * n_head * head_dim, 11);
        const std::vector<int32_t> pos = {0, 1, 2, 500, 501, 7, 100000, 3, 4};
        std::vector<float> want = x;
        for (size_t t = 0; t < n; ++t) rope_ref(&want[t * n_head * head_dim], n_head, head_dim, pos[t], params);
        const Tensor xt = f32(x, n_head * head_dim);
        be_->rope(xt, n_head, i32(pos), params);
        expect_close(get(xt), want, 1e-4f, style == RopeStyle::NORMAL ? "rope normal" : "rope neox");
    }
}

// Gemma 4's proportional RoPE: frequency factors (GGUF rope_freqs) divide each pair's angle; 1e30
// leaves a pair unrotated. Mixed factors (Llama 3 style) too, and two factor arrays in one backend.
TEST_P(BackendOps, RopeFrequencyFactors) {
    const size_t n = 7, n_head = 2, head_dim = 64;
    std::vector<float> proportional(head_dim / 2, 1e30f), mixed(head_dim / 2);
    for (size_t i = 0; i < head_dim / 8; ++i) proportional[i] = 1.0f;
    for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = 1.0f + 0.25f * static_cast<float>(i % 5);
    const std::vector<int32_t> pos = {0, 1, 9, 511, 512, 4095, 131071};
    for (const std::vector<float>* factors : {&proportional, &mixed, &proportional}) {
        const RopeParams params = {RopeStyle::NEOX, head_dim, 1000000.0f, 1.0f, factors->data()};
        const std::vector<float> x = random_floats(n * n_head * head_dim, 12);
        std::vector<float> want = x;
        for (size_t t = 0; t < n; ++t) rope_ref(&want[t * n_head * head_dim], n_head, head_dim, pos[t], params);
        const Tensor xt = f32(x, n_head * head_dim);
        be_->rope(xt, n_head, i32(pos), params);
        const std::vector<float> got = get(xt);
        expect_close(got, want, 1e-4f, factors == &mixed ? "rope, mixed factors" : "rope, proportional");
        if (factors != &proportional) continue;
        for (size_t t = 0; t < n; ++t)  // pairs (i, i + 32) with i >= 8 pass through unchanged
            for (size_t h = 0; h < n_head; ++h)
                for (size_t i = head_dim / 8; i < head_dim / 2; ++i)
                    for (size_t d : {i, i + head_dim / 2}) {
                        const size_t at = (t * n_head + h) * head_dim + d;
                        ASSERT_EQ(got[at], x[at]) << "token " << t << " dim " << d;
                    }
    }
}

// Values as a KV cache of `type` stores them: f16 rounding, int8 groups per head, f32 as given.
std::vector<float> as_stored(std::vector<float> x, size_t head_dim, KvType type) {
    std::vector<int8_t> q(head_dim);
    std::vector<float> scales(kv_groups_of(head_dim));
    for (size_t h0 = 0; h0 < x.size(); h0 += head_dim) {
        float* head = x.data() + h0;
        if (type == KvType::F16) {
            for (size_t i = 0; i < head_dim; ++i) head[i] = fp16_to_fp32(fp32_to_fp16(head[i]));
        } else if (type == KvType::I8) {
            kv_quantize_i8(q.data(), scales.data(), head, head_dim);
            kv_dequantize_i8(head, q.data(), scales.data(), head_dim);
        }
    }
    return x;
}

TEST_P(BackendOps, AttentionOverTheKvCacheEqualsTheReference) {
    // A global layer (one step of 11 tokens) and a sliding layer (window 4, ring rows reused over
    // steps of 4, 4 and 3 tokens); GQA with 2 query heads per KV head. window 1000: a global layer
    // whose tokens [3, 8) form a bidirectional span (KvTokens::last: Gemma 3's image rows). Every
    // KV precision, at head dims 40 and 512 (Gemma 4's global layers). Bounds: f16 2e-3 (keys,
    // values, queries and weights rounded to f16); int8 1e-4 and f32 1e-5 (the reference sees the
    // stored rows; f32 sums in another order).
    const size_t n_head = 4, n_head_kv = 2, n = 11, span_begin = 3, span_end = 8;
    auto run = [&](KvType type, size_t hd, float tol) {
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (uint32_t variant : {0u, 4u, 1000u}) {
            const bool span = variant == 1000u;
            const uint32_t window = span ? 0u : variant;
            auto in_span = [&](size_t t) { return span && t >= span_begin && t < span_end; };
            KvLayerSpec spec;
            spec.k_width = spec.v_width = n_head_kv * hd;
            spec.n_head_kv = n_head_kv;
            spec.window = window;
            KvCacheConfig config;
            config.n_ctx = 64;
            config.max_chunk = 16;
            config.kv.type = type;
            KvCache cache({spec}, config,
                          [&](const std::vector<KvLayerLayout>& l, KvType t) { return be_->make_kv_storage(l, t); });
            const std::vector<float> q = random_floats(n * n_head * hd, 20 + window);
            const std::vector<float> k = random_floats(n * n_head_kv * hd, 30 + window);
            const std::vector<float> v = random_floats(n * n_head_kv * hd, 40 + window);
            std::vector<float> got;
            for (size_t done = 0; done < n;) {
                const size_t c = cache.reserve(n - done);
                const size_t first = cache.append(c);
                std::vector<KvCache*> caches(c, &cache);
                std::vector<size_t> tokens(c), last(c);
                for (size_t t = 0; t < c; ++t) tokens[t] = first + t;
                for (size_t t = 0; t < c; ++t) last[t] = in_span(first + t) ? span_end - 1 : first + t;
                std::vector<KvView> views;
                const KvBatch kv =
                    kv_batch(KvTokens{c, caches.data(), tokens.data(), span ? last.data() : nullptr}, 0, views);
                auto rows = [&](const std::vector<float>& x, size_t width) {
                    return f32(std::vector<float>(x.begin() + done * width, x.begin() + (done + c) * width), width);
                };
                const Tensor out = zeros(n_head * hd, c);
                be_->kv_store(kv, rows(k, n_head_kv * hd), rows(v, n_head_kv * hd));
                be_->attention_kv(out, kv, rows(q, n_head * hd), n_head, scale);
                const std::vector<float> part = get(out);
                got.insert(got.end(), part.begin(), part.end());
                done += c;
            }
            // Reference: per token and head over the stored rows it may see (the query rounded to
            // f16 with f16 rows, as the kernels do).
            const std::vector<float> ks = as_stored(k, hd, type), vs = as_stored(v, hd, type);
            const std::vector<float> qs = type == KvType::F16 ? as_stored(q, hd, type) : q;
            std::vector<float> want(n * n_head * hd);
            for (size_t t = 0; t < n; ++t) {
                for (size_t h = 0; h < n_head; ++h) {
                    const size_t g = h / (n_head / n_head_kv);
                    const float* qh = &qs[(t * n_head + h) * hd];
                    std::vector<float> p;
                    std::vector<size_t> seen;
                    for (size_t j = 0; j < n; ++j) {
                        if ((j > t && !(in_span(t) && in_span(j))) || (window && j <= t && t - j >= window)) continue;
                        double dot = 0.0;
                        for (size_t d = 0; d < hd; ++d) dot += qh[d] * ks[(j * n_head_kv + g) * hd + d];
                        p.push_back(static_cast<float>(dot) * scale);
                        seen.push_back(j);
                    }
                    softmax_ref(p.data(), p.size());
                    for (size_t d = 0; d < hd; ++d) {
                        double acc = 0.0;
                        for (size_t s = 0; s < seen.size(); ++s) acc += p[s] * vs[(seen[s] * n_head_kv + g) * hd + d];
                        want[(t * n_head + h) * hd + d] = static_cast<float>(acc);
                    }
                }
            }
            const std::string what = std::string("attention (") + kv_type_name(type) + ", head_dim " +
                                     std::to_string(hd) +
                                     (span     ? ", bidirectional span)"
                                      : window ? ", sliding window 4)"
                                               : ", global)");
            expect_close(got, want, tol, what.c_str());
        }
    };
    for (size_t hd : {size_t(40), size_t(512)}) {
        run(KvType::F16, hd, 2e-3f);
        run(KvType::I8, hd, 1e-4f);
        run(KvType::F32, hd, 1e-5f);
    }
}

// Dense attention against a double reference. Shapes: a few queries over 9 keys; 3 queries over 700
// and 1 over 1,500 (Whisper's decoder over its encoder frames: on a GPU, clusters splitting the rows);
// encoder-like prompts of 33-70 queries.
TEST_P(BackendOps, DenseAttentionWithMaskAndCausal) {
    auto run = [&](size_t n_q, size_t n_kv, size_t hd) {
        const size_t n_head = 4, n_head_kv = 2;
        const std::vector<float> q = random_floats(n_q * n_head * hd, 50);
        const std::vector<float> k = random_floats(n_kv * n_head_kv * hd, 51);
        const std::vector<float> v = random_floats(n_kv * n_head_kv * hd, 52);
        std::vector<float> mask(n_q * n_kv, 0.0f);
        for (size_t i = 0; i < n_q; ++i) mask[i * n_kv + (i + 2) % n_kv] = -INFINITY;
        for (bool causal : {false, true}) {
            DenseAttention s;
            s.n_head = n_head;
            s.n_head_kv = n_head_kv;
            s.head_dim = s.head_dim_v = hd;
            s.scale = 0.3f;
            s.causal = causal;
            const Tensor out = zeros(n_head * hd, n_q);
            be_->attention_dense(out, f32(q, n_head * hd), f32(k, n_head_kv * hd), f32(v, n_head_kv * hd),
                                 f32(mask, n_kv), s);
            std::vector<float> want(n_q * n_head * hd, 0.0f);
            for (size_t i = 0; i < n_q; ++i) {
                for (size_t h = 0; h < n_head; ++h) {
                    const size_t g = h / (n_head / n_head_kv);
                    std::vector<double> p(n_kv);
                    double max = -INFINITY, sum = 0.0;
                    for (size_t j = 0; j < n_kv; ++j) {
                        double dot = 0.0;
                        for (size_t d = 0; d < hd; ++d)
                            dot += q[(i * n_head + h) * hd + d] * k[(j * n_head_kv + g) * hd + d];
                        p[j] = dot * 0.3 + mask[i * n_kv + j];
                        if (causal && j > i + (n_kv - n_q)) p[j] = -INFINITY;
                        max = std::max(max, p[j]);
                    }
                    for (double& x : p) sum += (x = std::exp(x - max));
                    for (size_t d = 0; d < hd; ++d) {
                        double acc = 0.0;
                        for (size_t j = 0; j < n_kv; ++j) acc += p[j] / sum * v[(j * n_head_kv + g) * hd + d];
                        want[(i * n_head + h) * hd + d] = static_cast<float>(acc);
                    }
                }
            }
            expect_close(get(out), want, 1e-5f, causal ? "dense attention (causal)" : "dense attention (mask)");
        }
    };
    struct Shape {
        size_t n_q, n_kv, hd;
    };
    // On a GPU: fewer than 32 queries take the clusters of warps, more the 32-query tiles (partial
    // tiles of queries and rows, head dims 40, 72 and 128, causal tiles skipped past the last query).
    for (const Shape& shape : {Shape{6, 9, 24}, Shape{3, 700, 64}, Shape{1, 1500, 64}, Shape{37, 61, 40},
                               Shape{70, 300, 72}, Shape{33, 1500, 128}, Shape{31, 40, 8}}) {
        SCOPED_TRACE("n_q " + std::to_string(shape.n_q) + ", n_kv " + std::to_string(shape.n_kv));
        run(shape.n_q, shape.n_kv, shape.hd);
    }
}

TEST_P(BackendOps, Convolutions) {
    {  // conv1d: [n_t, n_in] -> [n_t_out, n_out], kernel 3, stride 2, pad 1 (Whisper's second conv)
        const size_t n_t = 15, n_in = 5, n_out = 7, kernel = 3;
        const Conv1d c = {kernel, 2, 1};
        const std::vector<float> x = random_floats(n_t * n_in, 60);
        std::vector<float> w_values;
        const Tensor w = weight(DType::F32, n_in * kernel, n_out, 61, &w_values);
        const std::vector<float> b = random_floats(n_out, 62);
        const size_t n_t_out = (n_t + 2 - kernel) / 2 + 1;
        std::vector<float> want(n_t_out * n_out);
        for (size_t t = 0; t < n_t_out; ++t) {
            for (size_t o = 0; o < n_out; ++o) {
                double acc = b[o];
                for (size_t ch = 0; ch < n_in; ++ch) {
                    for (size_t kk = 0; kk < kernel; ++kk) {
                        const long src = static_cast<long>(t * 2 + kk) - 1;
                        if (src < 0 || src >= static_cast<long>(n_t)) continue;
                        acc += w_values[o * n_in * kernel + ch * kernel + kk] * x[src * n_in + ch];
                    }
                }
                want[t * n_out + o] = static_cast<float>(acc);
            }
        }
        const Tensor y = zeros(n_out, n_t_out);
        be_->conv1d(y, f32(x, n_in), w, f32(b, n_out), c);
        expect_close(get(y), want, 1e-5f, "conv1d");
    }
    {  // conv2d: 3 planes of 9x11, kernel 3x2, stride 2, pad 1 -> [h_out * w_out, n_out]
        Conv2d c;
        c.kernel_h = 3;
        c.kernel_w = 2;
        c.stride = 2;
        c.pad = 1;
        c.height = 9;
        c.width = 11;
        const size_t n_in = 3, n_out = 5;
        const std::vector<float> x = random_floats(n_in * c.height * c.width, 63);
        std::vector<float> w_values;
        const Tensor w = weight(DType::F32, n_in * 3 * 2, n_out, 64, &w_values);
        const size_t h_out = (c.height + 2 - 3) / 2 + 1, w_out = (c.width + 2 - 2) / 2 + 1;
        std::vector<float> want(h_out * w_out * n_out);
        for (size_t oy = 0; oy < h_out; ++oy) {
            for (size_t ox = 0; ox < w_out; ++ox) {
                for (size_t o = 0; o < n_out; ++o) {
                    double acc = 0.0;
                    for (size_t ch = 0; ch < n_in; ++ch) {
                        for (size_t ky = 0; ky < 3; ++ky) {
                            for (size_t kx = 0; kx < 2; ++kx) {
                                const long iy = static_cast<long>(oy * 2 + ky) - 1;
                                const long ix = static_cast<long>(ox * 2 + kx) - 1;
                                if (iy < 0 || ix < 0 || iy >= 9 || ix >= 11) continue;
                                acc += w_values[o * n_in * 6 + (ch * 3 + ky) * 2 + kx] * x[(ch * 9 + iy) * 11 + ix];
                            }
                        }
                    }
                    want[(oy * w_out + ox) * n_out + o] = static_cast<float>(acc);
                }
            }
        }
        const Tensor y = zeros(n_out, h_out * w_out);
        be_->conv2d(y, f32(x, c.height * c.width), w, Tensor(), c);
        expect_close(get(y), want, 1e-5f, "conv2d");
    }
}

TEST_P(BackendOps, ShortConvAndSetRows) {
    // LFM2's short convolution: 9 tokens of two sequences interleaved (e 13, L 3), predecessors in
    // this batch, in a state table, or none; against short_conv_ref. Then the scatter of rows.
    const size_t n = 9, e = 13, L = 3, state_rows = 6;
    const std::vector<float> bcx = random_floats(n * 3 * e, 70), w = random_floats(e * L, 71);
    const std::vector<float> state = random_floats(state_rows * e, 72);
    // hist [n, L - 1]: lag 1 then lag 2; >= 0 batch row, -1 none, <= -2 state row -2 - v.
    const std::vector<int32_t> hist = {-1, -1, -3, -2, 0, -1, 1, -3, 2, 0, 4, 1, 5, 3, 6, 4, 7, 5};
    std::vector<float> want_y(n * e), want_bx(n * e);
    short_conv_ref(want_y.data(), want_bx.data(), bcx.data(), w.data(), state.data(), state_rows, hist.data(), n, e, L);
    const Tensor t_hist = i32(hist).reshaped(L - 1, n);  // [n, L - 1]
    const Tensor y = zeros(e, n), bx = zeros(e, n), table = f32(state, e);
    be_->short_conv(y, bx, f32(bcx, 3 * e), f32(w, L), table, t_hist);
    expect_close(get(y), want_y, 1e-5f, "short_conv y");
    expect_close(get(bx), want_bx, 1e-5f, "short_conv bx");
    std::vector<int32_t> ids(n, -1);
    ids[1] = 4;
    ids[6] = 0;
    be_->set_rows(table, bx, i32(ids));
    std::vector<float> want_table = state;
    std::copy(want_bx.begin() + 1 * e, want_bx.begin() + 2 * e, want_table.begin() + 4 * e);
    std::copy(want_bx.begin() + 6 * e, want_bx.begin() + 7 * e, want_table.begin());
    expect_close(get(table), want_table, 0.0f, "set_rows");
    ids[2] = static_cast<int32_t>(state_rows);
    // The CPU refuses at once; a GPU when it synchronises (its kernel reports the id).
    EXPECT_THROW(
        {
            be_->set_rows(table, bx, i32(ids));
            be_->synchronize(std::chrono::milliseconds(5000));
        },
        Error);
    be_->synchronize(std::chrono::milliseconds(5000));  // reported once; the handle stays usable
    EXPECT_THROW(be_->short_conv(y, bx, f32(bcx, 3 * e), f32(w, L), table, i32(ids)), Error);  // hist of n, not 2n
}

TEST_P(BackendOps, SetRowsMasksSingleLogits) {
    // The sampler's bans on the device (DecoderModel::top_head): logits [3, 1001] seen as a table of
    // 3003 one-float rows, -inf written at row * 1001 + id; -1 entries (rows without bans) skipped.
    const size_t n_rows = 3, n_vocab = 1001;
    const std::vector<float> logits = random_floats(n_rows * n_vocab, 73);
    const std::vector<int32_t> banned = {0, 17, 1000, 999};
    std::vector<int32_t> ids;
    std::vector<float> want = logits;
    for (size_t r = 0; r < n_rows; ++r)
        for (int32_t id : banned) {
            const bool bans = r != 1;
            const int32_t at = static_cast<int32_t>(r * n_vocab) + id;
            ids.push_back(bans ? at : -1);
            if (bans) want[static_cast<size_t>(at)] = -INFINITY;
        }
    const Tensor table = f32(logits, 1);  // [3003, 1]
    be_->set_rows(table, f32(std::vector<float>(ids.size(), -INFINITY), 1), i32(ids));
    EXPECT_EQ(get(table), want);
}

// Every op checks its arguments in the Backend base class, before any backend runs: a bad shape
// or type is a cactus::Error naming the op, on every device alike.
void expect_error_naming(const std::function<void()>& call, const char* op) {
    try {
        call();
        ADD_FAILURE() << op << ": no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
}

TEST_P(BackendOps, MismatchedShapesAreErrors) {
    Backend& be = *be_;
    const Tensor w8 = f32(random_floats(4 * 8, 1), 8);  // [4, 8]
    const Tensor a = zeros(5, 2), b = zeros(4, 2), c = zeros(5, 3);
    expect_error_naming([&] { be.matmul(a, w8, zeros(7, 2)); }, "matmul");
    const SharedInputProduct products[] = {{&b, &w8}, {&a, &w8}};
    expect_error_naming([&] { be.matmuls(products, 2, zeros(8, 2)); }, "matmuls");
    expect_error_naming([&] { be.matmul_encoder(zeros(4, 3), w8, zeros(8, 2)); }, "matmul_encoder");
    expect_error_naming([&] { be.add(a, a, b); }, "add");
    expect_error_naming([&] { be.rms_norm(a, c, Tensor(), 1e-5f); }, "rms_norm");
    expect_error_naming([&] { be.rms_norm(a, a, zeros(4, 1), 1e-5f); }, "rms_norm");
    expect_error_naming([&] { be.layer_norm(a, a, Tensor(), zeros(6, 1), 1e-5f); }, "layer_norm");
    expect_error_naming([&] { be.scale(a, c, 2.0f); }, "scale");
    expect_error_naming([&] { be.softcap(a, a, 0.0f); }, "softcap");
    expect_error_naming([&] { be.gelu(a, b, Activation::GELU_TANH); }, "gelu");
    expect_error_naming([&] { be.glu(a, a, c, Activation::SILU); }, "glu");
    expect_error_naming([&] { be.get_rows(zeros(7, 2), w8, i32({0, 1}), 1.0f); }, "get_rows");
    expect_error_naming([&] { be.get_rows(zeros(8, 2), w8, i32({0, 1, 2}), 1.0f); }, "get_rows");
    const RopeParams rope{RopeStyle::NORMAL, 4, 10000.0f, 1.0f};
    expect_error_naming([&] { be.rope(zeros(12, 2), 5, i32({0, 1}), rope); }, "rope");
    expect_error_naming([&] { be.rope(zeros(12, 2), 3, i32({0}), rope); }, "rope");
    const RopeParams too_wide{RopeStyle::NORMAL, 6, 10000.0f, 1.0f};
    expect_error_naming([&] { be.rope(zeros(12, 2), 3, i32({0, 1}), too_wide); }, "rope");
    DenseAttention d;
    d.n_head = 2;
    d.n_head_kv = 1;
    d.head_dim = 4;
    d.head_dim_v = 4;
    expect_error_naming([&] { be.attention_dense(zeros(8, 3), zeros(8, 3), zeros(4, 5), zeros(4, 4), Tensor(), d); },
                        "attention_dense");
    expect_error_naming([&] { be.attention_dense(zeros(8, 3), zeros(8, 3), zeros(4, 5), zeros(4, 5), zeros(4, 3), d); },
                        "attention_dense");
    const Conv1d c1{3, 1, 0};
    expect_error_naming([&] { be.conv1d(zeros(4, 6), zeros(2, 7), f32(random_floats(4 * 6, 2), 6), Tensor(), c1); },
                        "conv1d");
    expect_error_naming([&] { be.conv1d(zeros(4, 4), zeros(3, 7), f32(random_floats(4 * 6, 2), 6), Tensor(), c1); },
                        "conv1d");
    Conv2d c2;
    c2.kernel_h = c2.kernel_w = 2;
    c2.height = c2.width = 3;
    expect_error_naming([&] { be.conv2d(zeros(4, 5), zeros(9, 2), f32(random_floats(4 * 8, 3), 8), Tensor(), c2); },
                        "conv2d");
    expect_error_naming([&] { be.set_rows(zeros(4, 3), zeros(5, 2), i32({0, 1})); }, "set_rows");
}

// The KV ops check the views: the batch against the tensors, the rows against the layer.
TEST_P(BackendOps, MismatchedKvViewsAreErrors) {
    KvLayerSpec spec;
    spec.k_width = spec.v_width = 8;
    spec.n_head_kv = 2;
    KvCacheConfig config;
    config.n_ctx = 8;
    KvCache cache({spec}, config,
                  [&](const std::vector<KvLayerLayout>& l, KvType t) { return be_->make_kv_storage(l, t); });
    cache.reserve(2);
    cache.append(2);
    std::vector<KvCache*> caches(2, &cache);
    const std::vector<size_t> tokens = {0, 1};
    std::vector<KvView> views;
    const KvBatch kv = kv_batch(KvTokens{2, caches.data(), tokens.data()}, 0, views);
    Backend& be = *be_;
    expect_error_naming([&] { be.kv_store(kv, zeros(8, 3), zeros(8, 3)); }, "kv_store");  // 3 rows, 2 tokens
    expect_error_naming([&] { be.kv_store(kv, zeros(6, 2), zeros(8, 2)); }, "kv_store");  // key width
    // Heads of 4 elements: q and out [2, 4 * 4].
    expect_error_naming([&] { be.attention_kv(zeros(16, 2), kv, zeros(12, 2), 4, 1.0f); }, "attention_kv");
    expect_error_naming([&] { be.attention_kv(zeros(12, 2), kv, zeros(12, 2), 3, 1.0f); }, "attention_kv");
    std::vector<KvView> outside = views;
    outside[1].rows.end = outside[1].layout.capacity + 1;
    expect_error_naming(
        [&] {
            be.attention_kv(zeros(16, 2), KvBatch{2, outside.data()}, zeros(16, 2), 4, 1.0f);
        },
        "attention_kv");
    outside = views;
    outside[0].row = outside[0].layout.capacity;
    expect_error_naming([&] { be.kv_store(KvBatch{2, outside.data()}, zeros(8, 2), zeros(8, 2)); }, "kv_store");
    be.kv_store(kv, zeros(8, 2), zeros(8, 2));  // the same batch, right shapes: accepted
    be.attention_kv(zeros(16, 2), kv, zeros(16, 2), 4, 1.0f);
    be.synchronize(std::chrono::milliseconds(30000));
}

// supports(op, type): every op runs f32 operands; the products read the common formats; a type a
// backend does not run is refused with an error naming it, before any kernel (never a crash).
TEST_P(BackendOps, SupportsAnswersAndUnsupportedTypesAreErrors) {
    Backend& be = *be_;
    for (size_t i = 0; i < kOpCount; ++i) {
        const Op op = static_cast<Op>(i);
        EXPECT_TRUE(be.supports(op, DType::F32)) << op_name(op);
        EXPECT_FALSE(be.supports(op, DType::I32)) << op_name(op);
    }
    for (DType t : {DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        EXPECT_TRUE(be.supports(Op::MATMUL, t)) << dtype_name(t);
        EXPECT_TRUE(be.supports(Op::GET_ROWS, t)) << dtype_name(t);
        EXPECT_TRUE(be.supports_weight(t)) << dtype_name(t);
    }
    for (DType t : {DType::F16, DType::I8, DType::F32}) {
        EXPECT_TRUE(be.supports(Op::KV_STORE, t)) << dtype_name(t);
        EXPECT_TRUE(be.supports(Op::ATTENTION_KV, t)) << dtype_name(t);
    }
    EXPECT_FALSE(be.supports(Op::RMS_NORM, DType::F16));
    // An I32 "weight": placed as bytes, refused by every product and gather.
    const std::vector<int32_t> bytes(4 * 8, 1);
    buffers_.push_back(be.alloc(bytes.size() * sizeof(int32_t)));
    const Tensor w = make_tensor(buffers_.back().get(), 0, DType::I32, 8, 4);
    be.upload(w, bytes.data(), bytes.size() * sizeof(int32_t));
    expect_error_naming([&] { be.matmul(zeros(4, 2), w, zeros(8, 2)); }, "not supported");
    expect_error_naming([&] { be.get_rows(zeros(8, 1), w, i32({0}), 1.0f); }, "not supported");
    expect_error_naming([&] { be.conv1d(zeros(4, 2), zeros(8, 2), w, Tensor(), Conv1d{1, 1, 0}); }, "not supported");
}

TEST(AvailableDevices, CpuFirstThenEveryUsableGpu) {
    const std::vector<std::string> devices = available_devices();
    ASSERT_FALSE(devices.empty());
    EXPECT_EQ(devices[0], "cpu");
    for (size_t i = 1; i < devices.size(); ++i) {
        EXPECT_EQ(devices[i], "cuda:" + std::to_string(i - 1));
        EXPECT_NO_THROW(make_backend(BackendOptions{devices[i]})) << devices[i];
    }
    if (!cuda_compiled()) {
        EXPECT_EQ(devices.size(), 1u);
    }
}

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                              DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Rows of random weights quantized to `type` (bytes) and their dequantized values (the reference).
void quantized_rows(DType type, size_t width, size_t rows, uint32_t seed, std::vector<uint8_t>* bytes,
                    std::vector<float>* values) {
    const std::vector<float> src = testing::random_floats(width * rows, seed);
    const size_t rb = dtype_row_bytes(type, width);
    bytes->assign(rb * rows, 0);
    values->assign(width * rows, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
        quantize_row_ref(type, bytes->data() + r * rb, src.data() + r * width, width);
        dequantize_row_ref(type, values->data() + r * width, bytes->data() + r * rb, width);
    }
}

size_t width_for(DType type, size_t plain_width) {
    const size_t block = dtype_traits(type).block_size;
    return block == 1 ? plain_width : (block == 32 ? 32 * 13 : 256 * 3);
}

TEST_P(BackendOps, MatmulEveryWeightTypeAgainstTheCpuDotReference) {
    Backend* be = be_.get();
    // Reference: the CPU's definition, vec_dot_ref over activations quantized to vec_dot_type
    // (Q8_0 / Q8_1 / Q8_K; f32 for float weights). Threshold: 2e-5 of sum |w x| + 1e-5 (the same
    // rounded inputs; only the float summation order differs).
    for (DType type : kWeightTypes) {
        ASSERT_TRUE(be->supports_weight(type)) << dtype_name(type);
        const size_t n_in = width_for(type, 77);
        const size_t n_out = 67;
        std::vector<uint8_t> wq;
        std::vector<float> wf;
        quantized_rows(type, n_in, n_out, 11 + static_cast<uint32_t>(type), &wq, &wf);
        const size_t rb = dtype_row_bytes(type, n_in);
        const DType dot_type = vec_dot_type(type);
        const testing::Held w = hold(*be, type, n_in, n_out, wq.data());
        for (size_t n : {size_t(1), size_t(5), size_t(13)}) {
            const std::vector<float> x = testing::random_floats(n * n_in, 7 + static_cast<uint32_t>(n), -2.0f, 2.0f);
            const testing::Held xd = hold_f32(*be, x, n_in);
            const testing::Held yd = hold(*be, DType::F32, n_out, n);
            be->matmul(yd.t, w.t, xd.t);
            const std::vector<float> y = download_f32(*be, yd.t);
            std::vector<uint8_t> xq(dtype_row_bytes(dot_type, n_in));
            for (size_t t = 0; t < n; ++t) {
                quantize_row_ref(dot_type, xq.data(), &x[t * n_in], n_in);
                for (size_t o = 0; o < n_out; ++o) {
                    const float ref = vec_dot_ref(type, wq.data() + o * rb, xq.data(), n_in);
                    double mag = 0.0;
                    for (size_t i = 0; i < n_in; ++i) mag += std::fabs(wf[o * n_in + i] * x[t * n_in + i]);
                    ASSERT_NEAR(y[t * n_out + o], ref, 2e-5 * mag + 1e-5)
                        << dtype_name(type) << " n=" << n << " t=" << t << " row " << o;
                }
            }
        }
    }
}

// y [n, n_out] = x W^T as the CPU defines it (vec_dot_ref over x rounded to vec_dot_type) and the
// bound of a backend's product per element: 2e-5 of sum |w x| + 1e-5, as the matmul test above.
void dot_reference(DType type, const std::vector<uint8_t>& wq, const std::vector<float>& wf, size_t n_in, size_t n_out,
                   const std::vector<float>& x, size_t n, std::vector<float>* y, std::vector<double>* bound) {
    const size_t rb = dtype_row_bytes(type, n_in);
    const DType dot_type = vec_dot_type(type);
    std::vector<uint8_t> xq(dtype_row_bytes(dot_type, n_in));
    y->assign(n * n_out, 0.0f);
    bound->assign(n * n_out, 0.0);
    for (size_t t = 0; t < n; ++t) {
        quantize_row_ref(dot_type, xq.data(), &x[t * n_in], n_in);
        for (size_t o = 0; o < n_out; ++o) {
            (*y)[t * n_out + o] = vec_dot_ref(type, wq.data() + o * rb, xq.data(), n_in);
            double mag = 0.0;
            for (size_t i = 0; i < n_in; ++i) mag += std::fabs(wf[o * n_in + i] * x[t * n_in + i]);
            (*bound)[t * n_out + o] = 2e-5 * mag + 1e-5;
        }
    }
}

void expect_within(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& bound,
                   const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), bound[i])
            << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
}

// A fused op against the separate ops it replaces, on the same backend. The CPU runs the separate
// ops (Backend's defaults), so bit for bit; a device with a fused kernel sums in its own order.
void expect_as_unfused(bool bit_exact, const std::vector<float>& fused, const std::vector<float>& unfused,
                       const std::vector<double>& bound, const std::string& what) {
    ASSERT_EQ(fused.size(), unfused.size()) << what;
    if (bit_exact) {
        EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0)
            << what << ": the fused op differs from the separate ops";
    } else {
        expect_within(fused, unfused, bound, what + " (fused vs separate ops)");
    }
}

TEST_P(BackendOps, MatmulAccumulateEqualsMatmulThenAdd) {
    Backend* be = be_.get();
    const bool bit_exact = GetParam() == "cpu";
    for (DType type : kWeightTypes) {
        const size_t n_in = width_for(type, 77), n_out = 67;
        std::vector<uint8_t> wq;
        std::vector<float> wf;
        quantized_rows(type, n_in, n_out, 31 + static_cast<uint32_t>(type), &wq, &wf);
        const testing::Held w = hold(*be, type, n_in, n_out, wq.data());
        for (size_t n : {size_t(1), size_t(5), size_t(13)}) {
            const std::string what = std::string(dtype_name(type)) + " n=" + std::to_string(n);
            const std::vector<float> in = testing::random_floats(n * n_in, 41 + static_cast<uint32_t>(n), -2.0f, 2.0f);
            const std::vector<float> x0 = testing::random_floats(n * n_out, 51 + static_cast<uint32_t>(n), -3.0f, 3.0f);
            const testing::Held ind = hold_f32(*be, in, n_in), xd = hold_f32(*be, x0, n_out),
                                tmp = hold(*be, DType::F32, n_out, n);
            be->matmul_accumulate(xd.t, w.t, ind.t, tmp.t);  // [n, n_out] x0 + in W^T
            const std::vector<float> fused = download_f32(*be, xd.t);
            const testing::Held xs = hold_f32(*be, x0, n_out), ys = hold(*be, DType::F32, n_out, n);
            be->matmul(ys.t, w.t, ind.t);
            be->add(xs.t, xs.t, ys.t);
            const std::vector<float> unfused = download_f32(*be, xs.t);
            std::vector<float> want;
            std::vector<double> bound;
            dot_reference(type, wq, wf, n_in, n_out, in, n, &want, &bound);
            for (size_t i = 0; i < want.size(); ++i) want[i] += x0[i];  // one more rounding: < 1e-5
            expect_within(fused, want, bound, what);
            expect_as_unfused(bit_exact, fused, unfused, bound, what);
        }
    }
}

float glu_ref(Activation act, float gate, float up) {
    float out = 0.0f;
    switch (act) {
        case Activation::SILU:
            swiglu_ref(&out, &gate, &up, 1);
            break;
        case Activation::GELU_TANH:
            geglu_ref(&out, &gate, &up, 1);
            break;
        case Activation::GELU_ERF:
            out = 0.5f * gate * (1.0f + std::erf(gate / std::sqrt(2.0f))) * up;
            break;
        case Activation::SIGMOID:
            sigmoid_glu_ref(&out, &gate, &up, 1);
            break;
    }
    return out;
}

TEST_P(BackendOps, GatedMatmulEqualsMatmulsThenGlu) {
    Backend* be = be_.get();
    const bool bit_exact = GetParam() == "cpu";
    const char* act_names[] = {"silu", "gelu tanh", "gelu erf", "sigmoid"};
    // Each weight type for both products, and two mixes (a K-quant file's gate and up may differ).
    std::vector<std::pair<DType, DType>> pairs;
    for (DType type : kWeightTypes) pairs.emplace_back(type, type);
    pairs.emplace_back(DType::Q4_K, DType::Q6_K);
    pairs.emplace_back(DType::Q8_0, DType::Q4_0);
    for (const auto& [gate_type, up_type] : pairs) {
        const size_t n_in = width_for(gate_type, 77), n_ff = 53;
        std::vector<uint8_t> gq, uq;
        std::vector<float> gf, uf;
        quantized_rows(gate_type, n_in, n_ff, 61 + static_cast<uint32_t>(gate_type), &gq, &gf);
        quantized_rows(up_type, n_in, n_ff, 71 + static_cast<uint32_t>(up_type), &uq, &uf);
        const testing::Held wg = hold(*be, gate_type, n_in, n_ff, gq.data()),
                            wu = hold(*be, up_type, n_in, n_ff, uq.data());
        for (size_t n : {size_t(1), size_t(6)}) {
            const std::vector<float> in = testing::random_floats(n * n_in, 81 + static_cast<uint32_t>(n), -2.0f, 2.0f);
            std::vector<float> g_ref, u_ref;
            std::vector<double> g_bound, u_bound;
            dot_reference(gate_type, gq, gf, n_in, n_ff, in, n, &g_ref, &g_bound);
            dot_reference(up_type, uq, uf, n_in, n_ff, in, n, &u_ref, &u_bound);
            const testing::Held ind = hold_f32(*be, in, n_in);
            for (Activation act :
                 {Activation::SILU, Activation::GELU_TANH, Activation::GELU_ERF, Activation::SIGMOID}) {
                const std::string what = std::string(dtype_name(gate_type)) + "/" + dtype_name(up_type) + " " +
                                         act_names[static_cast<int>(act)] + " n=" + std::to_string(n);
                const testing::Held gd = hold(*be, DType::F32, n_ff, n), ud = hold(*be, DType::F32, n_ff, n);
                be->gated_matmul(gd.t, ud.t, wg.t, wu.t, ind.t, act);  // [n, n_ff] act(in Wg^T) * in Wu^T
                const std::vector<float> fused = download_f32(*be, gd.t);
                const testing::Held gs = hold(*be, DType::F32, n_ff, n), us = hold(*be, DType::F32, n_ff, n);
                const SharedInputProduct products[] = {{&gs.t, &wg.t}, {&us.t, &wu.t}};
                be->matmuls(products, 2, ind.t);
                be->glu(gs.t, gs.t, us.t, act);
                const std::vector<float> unfused = download_f32(*be, gs.t);
                // Bound: the activations' slopes are below 1.2, so a product's bound carries over
                // scaled by the other factor; plus 1e-5 relative for the activation itself.
                std::vector<float> want(n * n_ff);
                std::vector<double> bound(n * n_ff);
                for (size_t i = 0; i < want.size(); ++i) {
                    want[i] = glu_ref(act, g_ref[i], u_ref[i]);
                    const double act_g = std::fabs(glu_ref(act, g_ref[i], 1.0f));
                    bound[i] = 1.2 * g_bound[i] * (std::fabs(u_ref[i]) + u_bound[i]) + act_g * u_bound[i] +
                               1e-5 * std::fabs(want[i]) + 1e-6;
                }
                expect_within(fused, want, bound, what);
                expect_as_unfused(bit_exact, fused, unfused, bound, what);
            }
        }
    }
}

TEST_P(BackendOps, MatmulsAddEachProductsBias) {
    Backend* be = be_.get();
    const bool bit_exact = GetParam() == "cpu";
    struct Product {
        DType type;
        size_t n_out;
        bool bias;
    };
    const Product specs[] = {{DType::F16, 67, true}, {DType::Q4_K, 29, false}, {DType::Q8_0, 45, true}};
    const size_t n_in = 256 * 3;  // whole blocks of every type
    for (size_t n : {size_t(1), size_t(7)}) {
        const std::vector<float> in = testing::random_floats(n * n_in, 91 + static_cast<uint32_t>(n), -2.0f, 2.0f);
        const testing::Held ind = hold_f32(*be, in, n_in);
        std::vector<testing::Held> weights, biases, fused_y, separate_y;
        std::vector<std::vector<float>> want(3), bias_values(3);
        std::vector<std::vector<double>> bound(3);
        for (size_t p = 0; p < 3; ++p) {
            const Product& s = specs[p];
            std::vector<uint8_t> wq;
            std::vector<float> wf;
            quantized_rows(s.type, n_in, s.n_out, 101 + static_cast<uint32_t>(p), &wq, &wf);
            weights.push_back(hold(*be, s.type, n_in, s.n_out, wq.data()));
            bias_values[p] = testing::random_floats(s.n_out, 111 + static_cast<uint32_t>(p), -4.0f, 4.0f);
            biases.push_back(hold_f32(*be, bias_values[p], s.n_out));
            fused_y.push_back(hold(*be, DType::F32, s.n_out, n));
            separate_y.push_back(hold(*be, DType::F32, s.n_out, n));
            dot_reference(s.type, wq, wf, n_in, s.n_out, in, n, &want[p], &bound[p]);
            for (size_t i = 0; s.bias && i < want[p].size(); ++i) want[p][i] += bias_values[p][i % s.n_out];
        }
        SharedInputProduct products[3];
        for (size_t p = 0; p < 3; ++p)
            products[p] = {&fused_y[p].t, &weights[p].t, specs[p].bias ? &biases[p].t : nullptr};
        be->matmuls(products, 3, ind.t);
        for (size_t p = 0; p < 3; ++p) {
            be->matmul(separate_y[p].t, weights[p].t, ind.t);
            if (specs[p].bias) be->add(separate_y[p].t, separate_y[p].t, biases[p].t);
        }
        for (size_t p = 0; p < 3; ++p) {
            const std::string what = "product " + std::to_string(p) + " (" + dtype_name(specs[p].type) +
                                     (specs[p].bias ? ", bias" : "") + ") n=" + std::to_string(n);
            const std::vector<float> fused = download_f32(*be, fused_y[p].t);
            expect_within(fused, want[p], bound[p], what);
            expect_as_unfused(bit_exact, fused, download_f32(*be, separate_y[p].t), bound[p], what);
        }
    }
}

// The fused products check their scratch and outputs too: a wrong shape or overlapping operands
// (a fused kernel reads one while it writes the other) are errors naming the op and the operand.
TEST_P(BackendOps, FusedProductArgumentsAreErrors) {
    Backend& be = *be_;
    const Tensor w8 = f32(random_floats(4 * 8, 1), 8);  // [4, 8]
    const Tensor w4 = f32(random_floats(4 * 4, 2), 4);  // [4, 4]
    const Tensor w5 = f32(random_floats(5 * 8, 3), 8);  // [5, 8]
    const Tensor x = zeros(4, 2), in = zeros(8, 2), tmp = zeros(4, 2);
    expect_error_naming([&] { be.matmul_accumulate(zeros(5, 2), w8, in, tmp); }, "matmul_accumulate");
    expect_error_naming([&] { be.matmul_accumulate(x, w8, zeros(7, 2), tmp); }, "matmul_accumulate");
    expect_error_naming([&] { be.matmul_accumulate(x, w8, in, zeros(4, 3)); }, "matmul_accumulate: tmp");
    expect_error_naming([&] { be.matmul_accumulate(x, w8, in, zeros(5, 2)); }, "matmul_accumulate: tmp");
    expect_error_naming([&] { be.matmul_accumulate(x, w8, in, Tensor()); }, "matmul_accumulate: tmp");
    expect_error_naming([&] { be.matmul_accumulate(x, w4, x, tmp); }, "matmul_accumulate: x and in overlap");
    expect_error_naming([&] { be.matmul_accumulate(x, w8, in, x); }, "matmul_accumulate: tmp and x overlap");
    const Tensor gate = zeros(4, 2), up = zeros(4, 2);
    for (Activation act : {Activation::SILU, Activation::SIGMOID}) {
        expect_error_naming([&] { be.gated_matmul(gate, zeros(4, 3), w8, w8, in, act); }, "gated_matmul: up");
        expect_error_naming([&] { be.gated_matmul(gate, zeros(5, 2), w8, w5, in, act); }, "gated_matmul: up");
        expect_error_naming([&] { be.gated_matmul(gate, up, w8, w5, in, act); }, "gated_matmul");
        expect_error_naming([&] { be.gated_matmul(gate, up, w5, w8, in, act); }, "gated_matmul");
        expect_error_naming([&] { be.gated_matmul(gate, up, w8, w8, zeros(7, 2), act); }, "gated_matmul");
        expect_error_naming([&] { be.gated_matmul(gate, gate, w8, w8, in, act); }, "gated_matmul: gate and up overlap");
        expect_error_naming([&] { be.gated_matmul(gate, up, w4, w4, gate, act); }, "gated_matmul: gate and in overlap");
    }
    const Tensor y = zeros(4, 2), bias_wide = zeros(5, 1), bias_rows = zeros(4, 2);
    const SharedInputProduct wide[] = {{&y, &w8, &bias_wide}};
    expect_error_naming([&] { be.matmuls(wide, 1, in); }, "matmuls: bias 0");
    const SharedInputProduct two_rows[] = {{&y, &w8}, {&y, &w8, &bias_rows}};
    expect_error_naming([&] { be.matmuls(two_rows, 2, in); }, "matmuls: bias 1");
    // An I32 "weight" is refused by both fused products before any kernel.
    const std::vector<int32_t> bytes(4 * 8, 1);
    buffers_.push_back(be.alloc(bytes.size() * sizeof(int32_t)));
    const Tensor wi = make_tensor(buffers_.back().get(), 0, DType::I32, 8, 4);
    be.upload(wi, bytes.data(), bytes.size() * sizeof(int32_t));
    expect_error_naming([&] { be.matmul_accumulate(x, wi, in, tmp); }, "not supported");
    expect_error_naming([&] { be.gated_matmul(gate, up, wi, w8, in, Activation::SILU); }, "not supported");
    expect_error_naming([&] { be.gated_matmul(gate, up, w8, wi, in, Activation::SILU); }, "not supported");
    // Right shapes: accepted.
    be.matmul_accumulate(x, w8, in, tmp);
    be.gated_matmul(gate, up, w8, w8, in, Activation::GELU_ERF);
    be.synchronize(std::chrono::milliseconds(30000));
}

TEST_P(BackendOps, GetRowsEveryTypeWithScale) {
    Backend* be = be_.get();
    // Threshold: 1e-6 relative (dequantization is exact in f32; the scale is one rounding).
    for (DType type : kWeightTypes) {
        const size_t width = width_for(type, 45);
        std::vector<uint8_t> tq;
        std::vector<float> tf;
        quantized_rows(type, width, 19, 3 + static_cast<uint32_t>(type), &tq, &tf);
        const testing::Held table = hold(*be, type, width, 19, tq.data());
        const std::vector<int32_t> ids = {4, 0, 18, 4, 7};
        const testing::Held idd = hold(*be, DType::I32, 1, ids.size(), ids.data());
        const testing::Held yd = hold(*be, DType::F32, width, ids.size());
        be->get_rows(yd.t, table.t, idd.t, 1.5f);
        const std::vector<float> y = download_f32(*be, yd.t);
        std::vector<float> ref;
        for (int32_t id : ids) {
            for (size_t i = 0; i < width; ++i) ref.push_back(tf[id * width + i] * 1.5f);
        }
        EXPECT_LE(worst_error(y, ref, 1e-7, 1e-6), 1.0) << dtype_name(type);
    }
}

TEST_P(BackendOps, GetRowsRejectsAnIdOutsideTheTable) {
    Backend* be = be_.get();
    const std::vector<float> tf = testing::random_floats(3 * 8, 1);
    const testing::Held table = hold_f32(*be, tf, 8);
    const std::vector<int32_t> ids = {1, 3};
    const testing::Held idd = hold(*be, DType::I32, 1, 2, ids.data());
    const testing::Held yd = hold(*be, DType::F32, 8, 2);
    // The CPU refuses at once; a GPU when it synchronises (its kernels report bad ids).
    EXPECT_THROW(
        {
            be->get_rows(yd.t, table.t, idd.t, 1.0f);
            be->synchronize(std::chrono::milliseconds(5000));
        },
        Error);
    be->synchronize(std::chrono::milliseconds(5000));  // reported once; the handle stays usable
}

TEST_P(BackendOps, NormsAndElementwise) {
    Backend* be = be_.get();
    const size_t n = 7, w = 301;
    const std::vector<float> x = testing::random_floats(n * w, 21, -3.0f, 3.0f);
    const std::vector<float> g = testing::random_floats(w, 22);
    const std::vector<float> bias = testing::random_floats(w, 23);
    const std::vector<float> u = testing::random_floats(n * w, 24, -2.0f, 2.0f);
    const testing::Held xd = hold_f32(*be, x, w), gd = hold_f32(*be, g, w), bd = hold_f32(*be, bias, w),
                        ud = hold_f32(*be, u, w), yd = hold(*be, DType::F32, w, n);
    std::vector<float> ref(n * w);
    // rms_norm / layer_norm: 1e-5 relative + 1e-6 absolute.
    be->rms_norm(yd.t, xd.t, gd.t, 1e-6f);
    for (size_t r = 0; r < n; ++r) rms_norm_ref(&ref[r * w], &x[r * w], g.data(), w, 1e-6f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "rms_norm";
    be->layer_norm(yd.t, xd.t, gd.t, bd.t, 1e-5f);
    for (size_t r = 0; r < n; ++r) layer_norm_ref(&ref[r * w], &x[r * w], g.data(), bias.data(), w, 1e-5f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-5, 1e-5), 1.0) << "layer_norm";
    // add (full and broadcast), scale, softcap: 1e-6 relative.
    be->add(yd.t, xd.t, ud.t);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] + u[i];
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "add";
    be->add(yd.t, xd.t, bd.t);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] + bias[i % w];
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "add broadcast";
    be->scale(yd.t, xd.t, -0.37f);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] * -0.37f;
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "scale";
    be->softcap(yd.t, xd.t, 2.5f);
    for (size_t i = 0; i < n * w; ++i) ref[i] = 2.5f * std::tanh(x[i] / 2.5f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "softcap";
    // gelu / glu: 1e-5 relative + 1e-6 absolute.
    be->gelu(yd.t, xd.t, Activation::GELU_TANH);
    for (size_t i = 0; i < n * w; ++i) ref[i] = gelu_tanh_ref(x[i]);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "gelu tanh";
    be->gelu(yd.t, xd.t, Activation::GELU_ERF);
    for (size_t i = 0; i < n * w; ++i) ref[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] / std::sqrt(2.0f)));
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "gelu erf";
    be->glu(yd.t, xd.t, ud.t, Activation::SILU);
    swiglu_ref(ref.data(), x.data(), u.data(), n * w);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "swiglu";
    be->glu(yd.t, xd.t, ud.t, Activation::GELU_TANH);
    geglu_ref(ref.data(), x.data(), u.data(), n * w);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "geglu";
}

TEST_P(BackendOps, RopeBothStylesPartialRotation) {
    Backend* be = be_.get();
    // Threshold: 1e-5 relative + 1e-5 absolute (angles in double as the reference computes them).
    const size_t n = 9, n_head = 3, head_dim = 40;
    for (RopeStyle style : {RopeStyle::NORMAL, RopeStyle::NEOX}) {
        for (size_t n_rot : {size_t(40), size_t(24)}) {
            const RopeParams p{style, n_rot, 10000.0f, 0.5f};
            std::vector<float> x = testing::random_floats(n * n_head * head_dim, 31);
            const std::vector<int32_t> pos = {0, 1, 2, 17, 300, 4095, 5, 6, 9000};
            const testing::Held xd = hold_f32(*be, x, n_head * head_dim);
            const testing::Held pd = hold(*be, DType::I32, 1, n, pos.data());
            be->rope(xd.t, n_head, pd.t, p);
            for (size_t t = 0; t < n; ++t) rope_ref(&x[t * n_head * head_dim], n_head, head_dim, pos[t], p);
            EXPECT_LE(worst_error(download_f32(*be, xd.t), x, 1e-5, 1e-5), 1.0)
                << (style == RopeStyle::NEOX ? "neox" : "normal") << " n_rot " << n_rot;
        }
    }
}

// The same appends and attention steps over a CPU cache and a cache of the backend under test:
// outputs must agree. bidirectional: every chunk is one span whose queries all see the whole chunk (KvTokens::last, as
// a Gemma 3 image), causal before it. Head dims dk (keys) and dv (values).
// steps: the tokens of each step (default: prompts of 7-13 tokens between single steps); n_head query
// heads over 2 KV heads.
void compare_kv_attention(Backend* gpu, KvType type, uint32_t window, uint32_t sinks, bool bidirectional = false,
                          size_t dk = 40, size_t dv = 72, std::vector<size_t> steps = {13, 1, 7, 1, 13, 1, 11, 1},
                          size_t n_head = 6) {
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    const size_t n_head_kv = 2;
    KvLayerSpec global;
    global.k_width = n_head_kv * dk;
    global.v_width = n_head_kv * dv;
    global.n_head_kv = n_head_kv;
    KvLayerSpec ring = global;
    ring.window = window;
    ring.sinks = sinks;
    KvCacheConfig config;
    config.n_ctx = std::accumulate(steps.begin(), steps.end(), size_t(16));
    config.max_chunk = *std::max_element(steps.begin(), steps.end());
    config.kv.type = type;
    const std::vector<KvLayerSpec> layers = {global, ring};
    auto make = [&](Backend& be) {
        return std::make_unique<KvCache>(
            layers, config, [&be](const std::vector<KvLayerLayout>& l, KvType t) { return be.make_kv_storage(l, t); });
    };
    std::unique_ptr<KvCache> kc = make(*cpu), kg = make(*gpu);
    uint32_t seed = 100;
    // Chunks of odd sizes: prefill, then decode steps, past the ring's capacity.
    for (size_t wanted : steps) {
        const size_t chunk = kc->reserve(wanted);  // a ring takes at most its window at once
        ASSERT_EQ(kg->reserve(wanted), chunk);
        const size_t first = kc->append(chunk);
        ASSERT_EQ(kg->append(chunk), first);
        std::vector<KvCache*> cc(chunk, kc.get()), cg(chunk, kg.get());
        std::vector<size_t> tokens(chunk), last(chunk, first + chunk - 1);
        for (size_t i = 0; i < chunk; ++i) tokens[i] = first + i;
        const size_t* span_end = bidirectional ? last.data() : nullptr;
        const KvTokens tc{chunk, cc.data(), tokens.data(), span_end}, tg{chunk, cg.data(), tokens.data(), span_end};
        for (size_t il = 0; il < 2; ++il) {
            std::vector<KvView> vc, vg;
            const KvBatch bc = kv_batch(tc, il, vc), bg = kv_batch(tg, il, vg);
            const std::vector<float> k = testing::random_floats(chunk * global.k_width, ++seed, -2.0f, 2.0f);
            const std::vector<float> v = testing::random_floats(chunk * global.v_width, ++seed);
            const std::vector<float> q = testing::random_floats(chunk * n_head * dk, ++seed);
            const testing::Held kcd = hold_f32(*cpu, k, global.k_width), vcd = hold_f32(*cpu, v, global.v_width),
                                qcd = hold_f32(*cpu, q, n_head * dk), ocd = hold(*cpu, DType::F32, n_head * dv, chunk);
            const testing::Held kgd = hold_f32(*gpu, k, global.k_width), vgd = hold_f32(*gpu, v, global.v_width),
                                qgd = hold_f32(*gpu, q, n_head * dk), ogd = hold(*gpu, DType::F32, n_head * dv, chunk);
            cpu->kv_store(bc, kcd.t, vcd.t);
            gpu->kv_store(bg, kgd.t, vgd.t);
            cpu->attention_kv(ocd.t, bc, qcd.t, n_head, 0.15f);
            gpu->attention_kv(ogd.t, bg, qgd.t, n_head, 0.15f);
            // Threshold: 2e-4 absolute + 1e-3 relative (same stored rows; f32 sums in another order, the
            // weights rounded to f16 at slightly different values with f16 rows); f32 rows round
            // nothing: 2e-5 + 1e-4.
            const bool f32 = type == KvType::F32;
            EXPECT_LE(
                worst_error(download_f32(*gpu, ogd.t), download_f32(*cpu, ocd.t), f32 ? 2e-5 : 2e-4, f32 ? 1e-4 : 1e-3),
                1.0)
                << "layer " << il << " tokens from " << first;
        }
    }
    // Row operations of compaction: read / write / move heads agree with the host storage.
    std::vector<float> a(std::max(dk, dv)), b(std::max(dk, dv));
    kg->storage().move_head(1, 3, 5, 1);
    kc->storage().move_head(1, 3, 5, 1);
    const std::vector<float> head = testing::random_floats(dk, 9);
    kg->storage().write_head(0, 2, 0, true, head.data());
    kc->storage().write_head(0, 2, 0, true, head.data());
    for (auto [il, row, h, key] : {std::tuple<size_t, size_t, size_t, bool>{1, 3, 1, false},
                                   {1, 3, 1, true},
                                   {0, 2, 0, true},
                                   {0, 7, 1, false}}) {
        kg->storage().read_head(il, row, h, key, a.data());
        kc->storage().read_head(il, row, h, key, b.data());
        const size_t dim = key ? dk : dv;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), dim * sizeof(float)), 0) << "head " << il << "/" << row << "/" << h;
    }
}

TEST_P(BackendOps, AttentionOverCacheF16GlobalAndRingWithSinks) { compare_kv_attention(be_.get(), KvType::F16, 9, 2); }
TEST_P(BackendOps, AttentionOverCacheInt8GlobalAndRing) { compare_kv_attention(be_.get(), KvType::I8, 16, 0); }
// kv_cache_type f32: rows stored as given (read_head equals the CPU's bit for bit), nothing rounded.
TEST_P(BackendOps, AttentionOverCacheF32GlobalAndRingWithSinks) { compare_kv_attention(be_.get(), KvType::F32, 9, 2); }
// Gemma 4's global layers: head_dim 512 (the kernel's limit), in every precision.
TEST_P(BackendOps, AttentionOverCacheHeadDim512EveryPrecision) {
    for (KvType type : {KvType::F16, KvType::I8, KvType::F32}) {
        SCOPED_TRACE(kv_type_name(type));
        compare_kv_attention(be_.get(), type, 9, 2, false, 512, 512);
    }
}
// Prompts at the models' head dims (64: SmolLM2, Qwen2.5-0.5B; 128: Qwen2.5-1.5B; 256: Gemma 3): the
// tiled kernels (the tensor-core one for f16 rows), global and a ring of 48 rows with 4 sinks, prompts
// of 37-48 tokens between single steps (several tiles of queries and of rows).
TEST_P(BackendOps, AttentionOverCachePromptTilesAtModelHeadDims) {
    const std::vector<size_t> steps = {45, 1, 37, 1, 48, 1, 40, 1};
    for (size_t hd : {size_t(64), size_t(128), size_t(256)}) {
        for (KvType type : {KvType::F16, KvType::I8, KvType::F32}) {
            SCOPED_TRACE(std::string(kv_type_name(type)) + " head dim " + std::to_string(hd));
            compare_kv_attention(be_.get(), type, 48, 4, false, hd, hd, steps);
        }
        SCOPED_TRACE("f16 bidirectional, head dim " + std::to_string(hd));
        compare_kv_attention(be_.get(), KvType::F16, 48, 4, true, hd, hd, steps);
    }
}
// A long prompt of many heads: enough (16-query tile, head) pairs that the tensor-core kernel runs
// one block per pair rather than clusters splitting the rows (4 pairs per SM: 528 on 132 SMs).
TEST_P(BackendOps, AttentionOverCacheLongPromptOfManyHeads) {
    compare_kv_attention(be_.get(), KvType::F16, 400, 4, false, 64, 64, {333, 1, 2}, 32);
}
// The kernels' bidirectional spans (KvView::mask.ahead) against the CPU backend.
TEST_P(BackendOps, AttentionOverCacheBidirectionalSpans) { compare_kv_attention(be_.get(), KvType::F16, 9, 2, true); }

TEST_P(BackendOps, DenseAttentionAndConvolutionsMatchCpu) {
    Backend* gpu = be_.get();
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    DenseAttention s;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 24;
    s.head_dim_v = 40;
    s.scale = 0.2f;
    for (const size_t n_q : {size_t(11), size_t(45)}) {  // GPU: clusters of warps, 32-query tiles
        const size_t n_kv = 17;
        const std::vector<float> q = testing::random_floats(n_q * 4 * 24, 41),
                                 k = testing::random_floats(n_kv * 2 * 24, 42),
                                 v = testing::random_floats(n_kv * 2 * 40, 43),
                                 m = testing::random_floats(n_q * n_kv, 44, -2.0f, 0.0f);
        for (bool causal : {false, true}) {
            s.causal = causal;
            std::vector<float> outs[2];
            Backend* bes[2] = {cpu.get(), gpu};
            for (int i = 0; i < 2; ++i) {
                const testing::Held qd = hold_f32(*bes[i], q, 96), kd = hold_f32(*bes[i], k, 48),
                                    vd = hold_f32(*bes[i], v, 80), md = hold_f32(*bes[i], m, n_kv),
                                    od = hold(*bes[i], DType::F32, 160, n_q);
                bes[i]->attention_dense(od.t, qd.t, kd.t, vd.t, md.t, s);
                outs[i] = download_f32(*bes[i], od.t);
            }
            EXPECT_LE(worst_error(outs[1], outs[0], 1e-5, 1e-4), 1.0)
                << "dense causal " << causal << ", " << n_q << " queries";
        }
    }
    // conv1d / conv2d with a Q8_0 weight: GPU vs CPU (the CPU quantizes activations: 2e-2 relative
    // of the row's magnitude is its own error; the GPU multiplies in f32).
    const Conv1d c1{3, 2, 1};
    const size_t n_t = 19, n_in = 32, n_out = 13;
    std::vector<uint8_t> wq;
    std::vector<float> wf;
    quantized_rows(DType::Q8_0, n_in * 3, n_out, 51, &wq, &wf);
    const std::vector<float> x = testing::random_floats(n_t * n_in, 52), bias = testing::random_floats(n_out, 53);
    const size_t n_t_out = (n_t + 2 - 3) / 2 + 1;
    std::vector<float> outs[2];
    Backend* bes[2] = {cpu.get(), gpu};
    for (int i = 0; i < 2; ++i) {
        const testing::Held wd = hold(*bes[i], DType::Q8_0, n_in * 3, n_out, wq.data()),
                            xd = hold_f32(*bes[i], x, n_in), bd = hold_f32(*bes[i], bias, n_out),
                            yd = hold(*bes[i], DType::F32, n_out, n_t_out);
        bes[i]->conv1d(yd.t, xd.t, wd.t, bd.t, c1);
        outs[i] = download_f32(*bes[i], yd.t);
    }
    EXPECT_LE(worst_error(outs[1], outs[0], 5e-2, 2e-2), 1.0) << "conv1d";
    Conv2d c2;
    c2.kernel_h = 3;
    c2.kernel_w = 2;
    c2.stride = 2;
    c2.pad = 1;
    c2.height = 7;
    c2.width = 9;
    const size_t planes = 16;  // weight width 16 * 3 * 2 = 96 = 3 Q8_0 blocks
    quantized_rows(DType::Q8_0, planes * 6, n_out, 61, &wq, &wf);
    const std::vector<float> img = testing::random_floats(planes * 63, 62);
    const size_t h_out = (7 + 2 - 3) / 2 + 1, w_out = (9 + 2 - 2) / 2 + 1;
    for (int i = 0; i < 2; ++i) {
        const testing::Held wd = hold(*bes[i], DType::Q8_0, planes * 6, n_out, wq.data()),
                            xd = hold_f32(*bes[i], img, 63), bd = hold_f32(*bes[i], bias, n_out),
                            yd = hold(*bes[i], DType::F32, n_out, h_out * w_out);
        bes[i]->conv2d(yd.t, xd.t, wd.t, bd.t, c2);
        outs[i] = download_f32(*bes[i], yd.t);
    }
    EXPECT_LE(worst_error(outs[1], outs[0], 5e-2, 2e-2), 1.0) << "conv2d";
}

// Real-model shapes and magnitudes against the CPU backend (not the reference): RoPE of smollm2
// (NORMAL, base 1e5) and gemma3 (NEOX, base 1e6, head 256) at positions 0..40 with inputs up to
// 50; attention with sharp scores (q, k up to 6: softmax near one-hot) over a 9/3-head f16 cache.
TEST_P(BackendOps, RopeRealShapesMatchCpuBackend) {
    Backend* gpu = be_.get();
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    struct Case {
        RopeParams p;
        size_t n_head, head_dim;
    };
    for (const Case& c : {Case{{RopeStyle::NORMAL, 64, 100000.0f, 1.0f}, 9, 64},
                          Case{{RopeStyle::NEOX, 256, 1000000.0f, 1.0f}, 4, 256}}) {
        const size_t n = 41, w = c.n_head * c.head_dim;
        const std::vector<float> x = testing::random_floats(n * w, 77, -50.0f, 50.0f);
        std::vector<int32_t> pos(n);
        for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
        std::vector<float> out[2];
        Backend* bes[2] = {cpu.get(), gpu};
        for (int i = 0; i < 2; ++i) {
            const testing::Held xd = hold_f32(*bes[i], x, w), pd = hold(*bes[i], DType::I32, 1, n, pos.data());
            bes[i]->rope(xd.t, c.n_head, pd.t, c.p);
            out[i] = download_f32(*bes[i], xd.t);
        }
        double worst = 0.0;
        for (size_t i = 0; i < out[0].size(); ++i) worst = std::max(worst, double(std::fabs(out[0][i] - out[1][i])));
        std::printf("[ rope %s ] largest |gpu - cpu| %.3g\n", c.p.style == RopeStyle::NEOX ? "neox" : "normal", worst);
        EXPECT_LE(worst_error(out[1], out[0], 1e-4, 1e-5), 1.0);
    }
}

TEST_P(BackendOps, SharpAttentionRealShapesMatchCpuBackend) {
    Backend* gpu = be_.get();
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    const size_t n_head = 9, n_head_kv = 3, d = 64, chunk = 29;
    KvLayerSpec spec;
    spec.k_width = n_head_kv * d;
    spec.v_width = n_head_kv * d;
    spec.n_head_kv = n_head_kv;
    KvCacheConfig config;
    config.n_ctx = 64;
    std::unique_ptr<KvCache> caches[2];
    Backend* bes[2] = {cpu.get(), gpu};
    const std::vector<float> k = testing::random_floats(chunk * spec.k_width, 81, -6.0f, 6.0f);
    const std::vector<float> v = testing::random_floats(chunk * spec.v_width, 82, -3.0f, 3.0f);
    const std::vector<float> q = testing::random_floats(chunk * n_head * d, 83, -6.0f, 6.0f);
    std::vector<float> out[2];
    for (int i = 0; i < 2; ++i) {
        Backend& be = *bes[i];
        caches[i] = std::make_unique<KvCache>(
            std::vector<KvLayerSpec>{spec}, config,
            [&be](const std::vector<KvLayerLayout>& l, KvType t) { return be.make_kv_storage(l, t); });
        caches[i]->reserve(chunk);
        caches[i]->append(chunk);
        std::vector<KvCache*> cs(chunk, caches[i].get());
        std::vector<size_t> tokens(chunk);
        for (size_t t = 0; t < chunk; ++t) tokens[t] = t;
        std::vector<KvView> views;
        const KvBatch b = kv_batch(KvTokens{chunk, cs.data(), tokens.data()}, 0, views);
        const testing::Held kd = hold_f32(be, k, spec.k_width), vd = hold_f32(be, v, spec.v_width),
                            qd = hold_f32(be, q, n_head * d), od = hold(be, DType::F32, n_head * d, chunk);
        be.kv_store(b, kd.t, vd.t);
        be.attention_kv(od.t, b, qd.t, n_head, 0.125f);
        out[i] = download_f32(be, od.t);
    }
    double worst = 0.0;
    for (size_t i = 0; i < out[0].size(); ++i) worst = std::max(worst, double(std::fabs(out[0][i] - out[1][i])));
    std::printf("[ sharp attention ] largest |gpu - cpu| %.3g\n", worst);
    EXPECT_LE(worst_error(out[1], out[0], 1e-3, 1e-3), 1.0);
}

// The devices of this build and machine, plus cuda:0 when absent: its instantiation then reports
// itself skipped with the reason (no CUDA in this build, no GPU or driver), never silently missing.
std::vector<std::string> devices_under_test() {
    std::vector<std::string> devices = available_devices();
    if (std::find(devices.begin(), devices.end(), "cuda:0") == devices.end()) devices.push_back("cuda:0");
    return devices;
}

// Test names end in the device: BackendOps.MatmulEveryWeightType/cpu, .../cuda_0.
std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), ':', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, BackendOps, ::testing::ValuesIn(devices_under_test()), device_name);

}  // namespace
}  // namespace cactus
