// CpuBackend: dense attention through dense_gemm (src/backends/cpu/dense_gemm.h), for long encoder
// inputs (Whisper's 1500 audio positions, vision patches). K and V of every head packed once, then
// per (head, block of 24 query rows): S = Q_h K_h^T, a softmax over each row (scale, optional mask,
// causal), O_h = P V_h, the block's scores kept in cache between the two products. Same result as the row-at-a-time loop of attention_dense up to float
// summation order; it is chosen by attention_dense for n_q >= kDenseGemmMinQueries
// (tests/models/audio: the dense attention test against the row loop). Also the encoders' linears
// (matmul_encoder): F16 / F32 weight rows as dense_gemm's B; and few queries without mask or
// causality (a decode step's cross-attention): attention_dense_few, straight from the rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/dense_gemm.h"
#include "backends/cpu/cpu_backend.h"
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

// Query rows per fused attention item: their scores (24 x 1500 floats for Whisper, 144 KiB) stay in
// L2 between the two products.
constexpr size_t kAttentionRowBlock = 24;

}  // namespace

void CpuBackend::do_matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) {
    if (!dense_operands(y, w, x)) {
        do_matmul(y, w, x);  // few rows, another weight type, or operands it refuses with the reason
        return;
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
    // Every KV head's K (as B rows: scores) and V (k-major: weighted sums) packed once, up front.
    const size_t kp = (n_kv + kDensePanel - 1) / kDensePanel, vp = (hdv + kDensePanel - 1) / kDensePanel;
    const size_t k_size = kp * std::max<size_t>(hd, 1) * kDensePanel,
                 v_size = vp * std::max<size_t>(n_kv, 1) * kDensePanel;
    const size_t per_head = k_size + v_size;  // [K panels | V panels] of one KV head
    dense_packed_.resize(s.n_head_kv * per_head);
    float* packed = dense_packed_.data();
    pool_->run_chunks(s.n_head_kv * (kp + vp), [&](size_t item) {
        const size_t kvh = item / (kp + vp), p = item % (kp + vp);
        float* head = packed + kvh * per_head;
        if (p < kp) {
            dense_pack_panel(head, DenseB{k.as<float>() + kvh * hd, k.width(), false}, n_kv, hd, p);
        } else {
            dense_pack_panel(head + k_size, DenseB{v.as<float>() + kvh * hdv, v.width(), true}, hdv, n_kv, p - kp);
        }
    });
    // Then (head, block of query rows) items, claimed dynamically: the block's scores [rows, n_kv]
    // stay in this thread's cache from S = Q K^T through the softmax to O = P V.
    const size_t n_blocks = (n_q + kAttentionRowBlock - 1) / kAttentionRowBlock;
    pool_->run_chunks(s.n_head * n_blocks, [&](size_t item) {
        const size_t h = item / n_blocks, i0 = (item % n_blocks) * kAttentionRowBlock;
        const size_t rows = std::min(kAttentionRowBlock, n_q - i0);
        const float* head = packed + (h / group) * per_head;
        thread_local std::vector<float> scores;  // [rows, n_kv]
        scores.resize(kAttentionRowBlock * n_kv);
        const float* qh = q.as<float>() + i0 * q.width() + h * hd;  // [rows, hd], row stride q.width()
        float* oh = out.as<float>() + i0 * out.width() + h * hdv;   // [rows, hdv], row stride out.width()
        dense_gemm_rows(scores.data(), n_kv, qh, q.width(), head, rows, n_kv, hd);
        for (size_t r = 0; r < rows; ++r) {
            const size_t i = i0 + r;
            const size_t visible = s.causal ? std::min(n_kv, i + shift + 1) : n_kv;
            softmax_row(scores.data() + r * n_kv, md ? md + i * n_kv : nullptr, n_kv, visible, s.scale);
        }
        dense_gemm_rows(oh, out.width(), scores.data(), n_kv, head + k_size, rows, hdv, n_kv);
    });
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
