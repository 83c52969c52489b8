// CpuBackend: KV store, attention over the KV cache (f16 / int8 / f32 rows, causal, sliding rings with
// sinks) and dense attention over given keys and values.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "backends/cpu/ops_cpu.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

namespace cactus {

namespace {

// Chunks of attention items per thread, claimed dynamically (attention_kv).
constexpr size_t kAttentionChunksPerThread = 16;

// The rows of a view, in host memory (a cache made by another backend is an error).
const HostKvStorage& host_rows(const KvView& view) {
    const auto* host = dynamic_cast<const HostKvStorage*>(view.storage);
    if (host == nullptr) fail("cpu attention_kv: the KV rows were not made by the CPU backend");
    return *host;
}

}  // namespace

void CpuBackend::do_kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v) {
    const float* kd = k.as<float>();
    const float* vd = v.as<float>();
    for (size_t t = 0; t < batch.n; ++t) {
        const KvView& view = batch.view[t];
        view.storage->write_row(view.layer, view.row, kd + t * k.width(), vd + t * v.width());
    }
}

void CpuBackend::do_attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head, float scale) {
    if (batch.n == 0) return;
    for (size_t t = 0; t < batch.n; ++t) host_rows(batch.view[t]);  // every view's rows in host memory
    const size_t n_head_kv = batch.view[0].layout.n_head_kv;
    // Work items: (token, KV head) with the group's query heads together; with too few of those to
    // keep every thread busy (decode), (token, head). Either way each head's output is the same.
    const size_t group = n_head / n_head_kv;
    const bool whole_groups = batch.n * n_head_kv >= 2 * static_cast<size_t>(pool_->size());
    const size_t n_q = whole_groups ? group : 1;
    const size_t items_per_token = n_head / n_q;
    const size_t n_items = batch.n * items_per_token;
    const float* qd = q.as<float>();
    float* od = out.as<float>();
    // Threads claim chunks of items, the last chunk first: a causal prefill's later tokens see more
    // rows (the second half of 512 tokens holds three quarters of the work), so an even split of
    // the items left one thread waiting on the other; the cheap first chunks go last and even out.
    const size_t n_chunks = std::min(n_items, kAttentionChunksPerThread * static_cast<size_t>(pool_->size()));
    std::atomic<size_t> next_chunk{0};
    pool_->run([&](int index, int) {
        AttentionWorkspace& ws = attn_ws_[static_cast<size_t>(index)];
        for (size_t c = next_chunk.fetch_add(1); c < n_chunks; c = next_chunk.fetch_add(1)) {
            const size_t chunk = n_chunks - 1 - c;
            const size_t begin = chunk * n_items / n_chunks, end = (chunk + 1) * n_items / n_chunks;
            for (size_t item = begin; item < end; ++item) {
                const size_t t = item / items_per_token;
                const size_t h = item % items_per_token * n_q;  // first query head of the item
                attend_heads(batch.view[t], qd + t * q.width(), od + t * out.width(), n_head, h, n_q, scale, ws);
            }
        }
    });
}

void CpuBackend::attend_heads(const KvView& view, const float* q, float* out, size_t n_head, size_t head, size_t n_q,
                              float scale, AttentionWorkspace& ws) const {
    const HostKvStorage& kv = static_cast<const HostKvStorage&>(*view.storage);  // checked by host_rows
    const size_t il = view.layer;
    const KvLayerLayout& l = view.layout;
    const size_t dk = l.k_width / l.n_head_kv;
    const size_t dv = l.v_width / l.n_head_kv;
    const size_t kvh = head / (n_head / l.n_head_kv);
    const RowRange rows = view.rows;  // physical bounds (checked against the capacity by Backend)
    const AttentionQueries aq = {q + head * dk, dk, out + head * dv, dv, n_q};
    const AttentionShape shape = {view.positions + rows.begin, rows.end - rows.begin, dk, dv, scale, view.mask};
    if (kv.type() == KvType::F16) {
        const KvRowsF16 k = {kv.k16(il, rows.begin) + kvh * dk, l.k_width, kv.v16(il, rows.begin) + kvh * dv,
                             l.v_width};
        attention_group(aq, k, shape, ws);
        return;
    }
    if (kv.type() == KvType::F32) {
        const KvRowsF32 k = {kv.k32(il, rows.begin) + kvh * dk, l.k_width, kv.v32(il, rows.begin) + kvh * dv,
                             l.v_width};
        attention_group(aq, k, shape, ws);
        return;
    }
    const size_t gph_k = kv_groups_of(dk);  // int8 scale groups per head
    const size_t gph_v = kv_groups_of(dv);
    const KvRowsQ8 k = {
        kv.k8(il, rows.begin) + kvh * dk, l.k_width, kv.k_scales(il, rows.begin) + kvh * gph_k, kv.k_scale_stride(il),
        kv.v8(il, rows.begin) + kvh * dv, l.v_width, kv.v_scales(il, rows.begin) + kvh * gph_v, kv.v_scale_stride(il)};
    attention_group(aq, k, shape, ws);
}

void CpuBackend::do_attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, const DenseAttention& s) {
    const size_t n_q = q.rows();
    const size_t n_kv = k.rows();
    if (n_q >= kDenseGemmMinQueries && !force_dense_rows_) {
        attention_dense_gemm(out, q, k, v, mask, s);
        return;
    }
    if (mask.empty() && !s.causal && !force_dense_rows_) {
        attention_dense_few(out, q, k, v, s);
        return;
    }
    const float* qd = q.as<float>();
    const float* kd = k.as<float>();
    const float* vd = v.as<float>();
    const float* md = mask.empty() ? nullptr : mask.as<float>();
    float* od = out.as<float>();
    const size_t group = s.n_head / s.n_head_kv;
    const size_t shift = n_kv >= n_q ? n_kv - n_q : 0;  // causal: query i sees keys j <= i + shift
    pool_->run_chunks(n_q * s.n_head, [&](size_t item) {
        const size_t i = item / s.n_head;
        const size_t h = item % s.n_head;
        const size_t kvh = h / group;
        std::vector<float> p(n_kv);
        const float* qi = qd + i * q.width() + h * s.head_dim;
        float max = -std::numeric_limits<float>::infinity();
        for (size_t j = 0; j < n_kv; ++j) {
            const float* kj = kd + j * k.width() + kvh * s.head_dim;
            // Eight independent partial sums so the compiler vectorises the product.
            float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            size_t d = 0;
            for (; d + 8 <= s.head_dim; d += 8)
                for (size_t l = 0; l < 8; ++l) lane[l] += qi[d + l] * kj[d + l];
            float dot = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
            for (; d < s.head_dim; ++d) dot += qi[d] * kj[d];
            float score = dot * s.scale + (md ? md[i * n_kv + j] : 0.0f);
            if (s.causal && j > i + shift) score = -std::numeric_limits<float>::infinity();
            p[j] = score;
            max = std::max(max, score);
        }
        float* oi = od + i * out.width() + h * s.head_dim_v;
        std::fill(oi, oi + s.head_dim_v, 0.0f);
        if (max == -std::numeric_limits<float>::infinity()) return;  // no visible key
        double sum = 0.0;
        for (size_t j = 0; j < n_kv; ++j) {
            p[j] = std::exp(p[j] - max);
            sum += p[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (size_t j = 0; j < n_kv; ++j) {
            if (p[j] == 0.0f) continue;
            const float w = p[j] * inv;
            const float* vj = vd + j * v.width() + kvh * s.head_dim_v;
            for (size_t d = 0; d < s.head_dim_v; ++d) oi[d] += w * vj[d];
        }
    });
}

}  // namespace cactus
