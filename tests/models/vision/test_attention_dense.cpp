// CpuBackend::attention_dense (the encoders' attention) against a double-precision scalar
// reference on random data of odd sizes: GQA groups, causal with n_kv > n_q, an additive mask.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/backend.h"

namespace {

std::vector<float> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& mask, size_t n_q, size_t n_kv, const cactus::DenseAttention& s) {
    std::vector<float> out(n_q * s.n_head * s.head_dim_v, 0.0f);
    const size_t group = s.n_head / s.n_head_kv;
    for (size_t i = 0; i < n_q; ++i)
        for (size_t h = 0; h < s.n_head; ++h) {
            const size_t kh = h / group;
            std::vector<double> p(n_kv);
            double max = -INFINITY;
            for (size_t j = 0; j < n_kv; ++j) {
                double dot = 0;
                for (size_t d = 0; d < s.head_dim; ++d)
                    dot += double(q[i * s.n_head * s.head_dim + h * s.head_dim + d]) *
                           k[j * s.n_head_kv * s.head_dim + kh * s.head_dim + d];
                p[j] = dot * s.scale + (mask.empty() ? 0.0 : mask[i * n_kv + j]);
                if (s.causal && j > i + (n_kv - n_q)) p[j] = -INFINITY;
                max = std::max(max, p[j]);
            }
            double sum = 0;
            for (double& x : p) sum += (x = std::exp(x - max));
            for (size_t d = 0; d < s.head_dim_v; ++d) {
                double acc = 0;
                for (size_t j = 0; j < n_kv; ++j)
                    acc += p[j] / sum * v[j * s.n_head_kv * s.head_dim_v + kh * s.head_dim_v + d];
                out[i * s.n_head * s.head_dim_v + h * s.head_dim_v + d] = float(acc);
            }
        }
    return out;
}

void check(size_t n_q, size_t n_kv, bool causal, bool with_mask, size_t head_dim) {
    cactus::DenseAttention s;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = head_dim;
    s.head_dim_v = head_dim + 3;
    s.scale = 1.0f / std::sqrt(float(head_dim));
    s.causal = causal;
    std::mt19937 rng(unsigned(n_q * 131 + n_kv));
    std::normal_distribution<float> nd;
    auto fill = [&](size_t n) {
        std::vector<float> x(n);
        for (float& e : x) e = nd(rng);
        return x;
    };
    const std::vector<float> q = fill(n_q * s.n_head * s.head_dim), k = fill(n_kv * s.n_head_kv * s.head_dim),
                             v = fill(n_kv * s.n_head_kv * s.head_dim_v);
    std::vector<float> mask;
    if (with_mask) {
        mask = fill(n_q * n_kv);
        mask[1] = -INFINITY;
    }
    auto be = cactus::make_backend(cactus::BackendOptions());
    auto buf = be->alloc((q.size() + k.size() + v.size() + mask.size() + n_q * s.n_head * s.head_dim_v) * 4);
    size_t off = 0;
    auto put = [&](const std::vector<float>& x, size_t width) {
        const cactus::Tensor t = cactus::make_tensor(buf.get(), off, cactus::DType::F32, width, x.size() / width);
        be->upload(t, x.data(), x.size() * 4);
        off += x.size() * 4;
        return t;
    };
    const cactus::Tensor tq = put(q, s.n_head * s.head_dim), tk = put(k, s.n_head_kv * s.head_dim),
                         tv = put(v, s.n_head_kv * s.head_dim_v);
    const cactus::Tensor tm = with_mask ? put(mask, n_kv) : cactus::Tensor();
    const cactus::Tensor out = cactus::make_tensor(buf.get(), off, cactus::DType::F32, s.n_head * s.head_dim_v, n_q);
    be->attention_dense(out, tq, tk, tv, tm, s);
    const std::vector<float> got = cactus::download_f32(*be, out);
    const std::vector<float> want = reference(q, k, v, mask, n_q, n_kv, s);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::fabs(want[i]))) << i;
}

}  // namespace

TEST(AttentionDense, MatchesReference) {
    check(7, 13, false, false, 19);
    check(7, 13, true, false, 16);
    check(5, 5, false, true, 64);
    check(33, 40, true, true, 67);
}
