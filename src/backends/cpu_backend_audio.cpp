// CpuBackend: dense attention through the GEMM kernels, for long encoder inputs (Whisper's 1500
// audio positions, vision patches). Head by head: S = Q_h K_h^T with K_h as F32 weight rows,
// a softmax over each row (scale, optional mask, causal), O_h = P V_h with V_h^T as weight rows.
// Same result as the row-at-a-time loop of attention_dense up to float summation order; it is
// chosen by attention_dense for n_q >= kDenseGemmMinQueries (tests/backends: test_dense_attention_gemm).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu_backend.h"

namespace cactus {

void CpuBackend::attention_dense_gemm(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& mask, const DenseAttention& s) {
    const size_t n_q = q.rows(), n_kv = k.rows(), hd = s.head_dim, hdv = s.head_dim_v;
    const size_t group = s.n_head / s.n_head_kv;
    const size_t shift = n_kv >= n_q ? n_kv - n_q : 0;  // causal: query i sees keys j <= i + shift
    const float* qd = q.as<float>();
    const float* kd = k.as<float>();
    const float* vd = v.as<float>();
    const float* md = mask.empty() ? nullptr : mask.as<float>();
    float* od = out.as<float>();
    std::vector<float> qh(n_q * hd), kh(n_kv * hd), vt(hdv * n_kv), scores(n_q * n_kv), oh(n_q * hdv);
    for (size_t h = 0; h < s.n_head; ++h) {
        const size_t kvh = h / group;
        for (size_t i = 0; i < n_q; ++i) std::copy_n(qd + i * q.width() + h * hd, hd, qh.data() + i * hd);
        if (h % group == 0) {  // K_h [n_kv, hd] and V_h^T [hdv, n_kv], once per KV head
            for (size_t j = 0; j < n_kv; ++j) {
                std::copy_n(kd + j * k.width() + kvh * hd, hd, kh.data() + j * hd);
                const float* vj = vd + j * v.width() + kvh * hdv;
                for (size_t d = 0; d < hdv; ++d) vt[d * n_kv + j] = vj[d];
            }
        }
        cactus::matmul(scores.data(), kh.data(), DType::F32, hd * sizeof(float), qh.data(), n_q, hd, n_kv, *pool_);
        pool_->parallel_for(n_q, [&](size_t begin, size_t end) {
            for (size_t i = begin; i < end; ++i) {
                float* row = scores.data() + i * n_kv;  // [n_kv]
                const size_t visible = s.causal ? std::min(n_kv, i + shift + 1) : n_kv;
                float max = -std::numeric_limits<float>::infinity();
                for (size_t j = 0; j < visible; ++j) {
                    row[j] = row[j] * s.scale + (md ? md[i * n_kv + j] : 0.0f);
                    max = std::max(max, row[j]);
                }
                if (max == -std::numeric_limits<float>::infinity()) {  // no visible key: zeros
                    std::fill(row, row + n_kv, 0.0f);
                    continue;
                }
                double sum = 0.0;
                for (size_t j = 0; j < visible; ++j) {
                    row[j] = std::exp(row[j] - max);
                    sum += row[j];
                }
                const float inv = static_cast<float>(1.0 / sum);
                for (size_t j = 0; j < visible; ++j) row[j] *= inv;
                std::fill(row + visible, row + n_kv, 0.0f);
            }
        });
        cactus::matmul(oh.data(), vt.data(), DType::F32, n_kv * sizeof(float), scores.data(), n_q, n_kv, hdv, *pool_);
        for (size_t i = 0; i < n_q; ++i) std::copy_n(oh.data() + i * hdv, hdv, od + i * out.width() + h * hdv);
    }
}

}  // namespace cactus
