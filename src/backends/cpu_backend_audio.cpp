// CpuBackend: dense attention through dense_gemm (src/backends/cpu/dense_gemm.h), for long encoder
// inputs (Whisper's 1500 audio positions, vision patches). Head by head: S = Q_h K_h^T, a softmax
// over each row (scale, optional mask, causal), O_h = P V_h, the products read straight from the
// q / k / v rows (no copies). Same result as the row-at-a-time loop of attention_dense up to float
// summation order; it is chosen by attention_dense for n_q >= kDenseGemmMinQueries
// (tests/audio: the dense attention test against the row loop).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/dense_gemm.h"
#include "backends/cpu_backend.h"

namespace cactus {

namespace {

// One row of scores [n_kv] -> attention weights: scale, mask, causal limit `visible`; a row that
// sees no key becomes zeros (its output is then zero, as in the row loop).
void softmax_row(float* row, const float* mask_row, size_t n_kv, size_t visible, float scale) {
    const AttentionRowKernels& rk = attention_row_kernels();
    if (mask_row == nullptr) {
        rk.softmax(row, visible, scale, false);
    } else {
        float max = -std::numeric_limits<float>::infinity();
        for (size_t j = 0; j < visible; ++j) {
            row[j] = row[j] * scale + mask_row[j];
            max = std::max(max, row[j]);
        }
        if (max == -std::numeric_limits<float>::infinity()) visible = 0;
        if (visible > 0) rk.softmax(row, visible, 1.0f, false);
    }
    std::fill(row + visible, row + n_kv, 0.0f);
}

}  // namespace

void CpuBackend::attention_dense_gemm(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& mask, const DenseAttention& s) {
    const size_t n_q = q.rows(), n_kv = k.rows(), hd = s.head_dim, hdv = s.head_dim_v;
    const size_t group = s.n_head / s.n_head_kv;
    const size_t shift = n_kv >= n_q ? n_kv - n_q : 0;  // causal: query i sees keys j <= i + shift
    const float* md = mask.empty() ? nullptr : mask.as<float>();
    std::vector<float> scores(n_q * n_kv), packed;  // scores [n_q, n_kv]
    for (size_t h = 0; h < s.n_head; ++h) {
        const size_t kvh = h / group;
        const float* qh = q.as<float>() + h * hd;     // [n_q, hd], row stride q.width()
        const float* kh = k.as<float>() + kvh * hd;   // [n_kv, hd], row stride k.width()
        const float* vh = v.as<float>() + kvh * hdv;  // [n_kv, hdv], row stride v.width()
        float* oh = out.as<float>() + h * hdv;        // [n_q, hdv], row stride out.width()
        dense_gemm(scores.data(), n_kv, qh, q.width(), DenseB{kh, k.width(), false}, n_q, n_kv, hd, packed, *pool_);
        pool_->parallel_for(n_q, [&](size_t begin, size_t end) {
            for (size_t i = begin; i < end; ++i) {
                const size_t visible = s.causal ? std::min(n_kv, i + shift + 1) : n_kv;
                softmax_row(scores.data() + i * n_kv, md ? md + i * n_kv : nullptr, n_kv, visible, s.scale);
            }
        });
        dense_gemm(oh, out.width(), scores.data(), n_kv, DenseB{vh, v.width(), true}, n_q, hdv, n_kv, packed, *pool_);
    }
}

}  // namespace cactus
