// CpuBackend: dense attention through dense_gemm (src/backends/cpu/dense_gemm.h), for long encoder
// inputs (Whisper's 1500 audio positions, vision patches). Head by head: S = Q_h K_h^T, a softmax
// over each row (scale, optional mask, causal), O_h = P V_h, the products read straight from the
// q / k / v rows (no copies). Same result as the row-at-a-time loop of attention_dense up to float
// summation order; it is chosen by attention_dense for n_q >= kDenseGemmMinQueries
// (tests/audio: the dense attention test against the row loop). Also the encoders' linears
// (matmul_encoder): F16 / F32 weight rows as dense_gemm's B; and few queries without mask or
// causality (a decode step's cross-attention): attention_dense_few, straight from the rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/dense_gemm.h"
#include "backends/cpu_backend.h"
#include "core/error.h"

namespace cactus {

namespace {

// One row of scores [n_kv] -> attention weights: scale, mask, causal limit `visible`; a row that
// sees no key becomes zeros (its output is then zero, as in the row loop).
void softmax_row(float* row, const float* mask_row, size_t n_kv, size_t visible, float scale) {
    const AttentionRowKernels& rk = attention_row_kernels();
    if (visible == 0) {
        // nothing to see (no keys): zeros below
    } else if (mask_row == nullptr) {
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

bool host_f32_rows(const Tensor& t) {
    return !t.empty() && std::strcmp(t.buffer->device(), "cpu") == 0 && t.type == DType::F32 && t.contiguous_rows();
}

// matmul_encoder's dense_gemm path: F16 / F32 weights on the host, enough rows, f32 rows in and out.
bool dense_operands(const Tensor& y, const Tensor& w, const Tensor& x) {
    if (w.empty() || std::strcmp(w.buffer->device(), "cpu") != 0) return false;
    if (w.type != DType::F16 && w.type != DType::F32) return false;
    return x.rows() >= CpuBackend::kDenseGemmMinQueries && host_f32_rows(x) && host_f32_rows(y);
}

}  // namespace

void CpuBackend::matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) {
    if (!dense_operands(y, w, x)) {
        matmul(y, w, x);  // few rows, another weight type, or operands it refuses with the reason
        return;
    }
    if (x.width() != w.width() || y.width() != w.rows() || y.rows() != x.rows()) {
        fail("matmul_encoder: y [%zu, %zu] = x [%zu, %zu] W^T with W [%zu, %zu] do not match", y.rows(), y.width(),
             x.rows(), x.width(), w.rows(), w.width());
    }
    if (w.row_bytes() < dtype_row_bytes(w.type, w.width())) fail("matmul_encoder: weight rows overlap");
    dense_matmul(y.as<float>(), w.data(), w.type, w.row_bytes(), x.as<float>(), x.rows(), w.width(), w.rows(),
                 dense_packed_, *pool_);
}

void CpuBackend::attention_dense_gemm(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& mask, const DenseAttention& s) {
    const size_t n_q = q.rows(), n_kv = k.rows(), hd = s.head_dim, hdv = s.head_dim_v;
    const size_t group = s.n_head / s.n_head_kv;
    const size_t shift = n_kv >= n_q ? n_kv - n_q : 0;  // causal: query i sees keys j <= i + shift
    const float* md = mask.empty() ? nullptr : mask.as<float>();
    std::vector<float> scores(n_q * n_kv);  // scores [n_q, n_kv]
    std::vector<float>& packed = dense_packed_;
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

void CpuBackend::attention_dense_few(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const DenseAttention& s) {
    const size_t n_q = q.rows(), n_kv = k.rows(), hd = s.head_dim, hdv = s.head_dim_v;
    const size_t group = s.n_head / s.n_head_kv;
    const DenseGemmKernels& dk = dense_gemm_kernels();
    const AttentionRowKernels& rk = attention_row_kernels();
    pool_->run_chunks(n_q * s.n_head, [&](size_t item) {
        const size_t i = item / s.n_head, h = item % s.n_head, kvh = h / group;
        float* oi = out.as<float>() + i * out.width() + h * hdv;  // [hdv]
        std::fill(oi, oi + hdv, 0.0f);
        if (n_kv == 0) return;
        thread_local std::vector<float> p;  // [n_kv] scores, then weights
        p.resize(n_kv);
        dk.dot_rows(p.data(), q.as<float>() + i * q.width() + h * hd, k.as<float>() + kvh * hd, k.width(), n_kv, hd);
        rk.softmax(p.data(), n_kv, s.scale, false);
        dk.axpy_rows(oi, p.data(), v.as<float>() + kvh * hdv, v.width(), n_kv, hdv);
    });
}

}  // namespace cactus
