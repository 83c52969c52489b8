// CpuBackend: KV store, attention over the KV cache (f16 / int8 / f32 rows, causal, sliding rings with
// sinks) and dense attention over given keys and values.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "backends/cpu/ops_cpu.h"
#include "backends/cpu_backend.h"
#include "core/error.h"

namespace cactus {

namespace {
// Chunks of attention items per thread, claimed dynamically (attention_kv).
constexpr size_t kAttentionChunksPerThread = 16;
}  // namespace

void CpuBackend::kv_store(size_t il, const KvBatch& batch, const Tensor& k, const Tensor& v) {
    CACTUS_ASSERT(k.type == DType::F32 && v.type == DType::F32 && k.rows() == batch.n && v.rows() == batch.n);
    const float* kd = k.as<float>();
    const float* vd = v.as<float>();
    for (size_t t = 0; t < batch.n; ++t) {
        KvCache& cache = *batch.cache[t];
        CACTUS_ASSERT(k.width() == cache.spec(il).k_width && v.width() == cache.spec(il).v_width);
        const size_t row = cache.row_of(il, batch.token[t]);
        cache.write_row(il, row, kd + t * k.width(), vd + t * v.width());
    }
}

void CpuBackend::attention_kv(const Tensor& out, size_t il, const KvBatch& batch, const Tensor& q, size_t n_head,
                              float scale) {
    CACTUS_ASSERT(out.type == DType::F32 && q.type == DType::F32 && q.rows() == batch.n && out.rows() == batch.n);
    if (batch.n == 0) return;
    const KvLayerSpec& spec = batch.cache[0]->spec(il);
    const size_t n_head_kv = spec.n_head_kv;
    CACTUS_ASSERT(n_head % n_head_kv == 0 && q.width() % n_head == 0 && out.width() % n_head == 0);
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
                attend_heads(il, batch, t, qd + t * q.width(), od + t * out.width(), n_head, h, n_q, scale, ws);
            }
        }
    });
}

void CpuBackend::attend_heads(size_t il, const KvBatch& batch, size_t t, const float* q, float* out, size_t n_head,
                              size_t head, size_t n_q, float scale, AttentionWorkspace& ws) const {
    const KvCache& kv = *batch.cache[t];
    const size_t token = batch.token[t];
    const KvLayerSpec& spec = kv.spec(il);
    const size_t dk = spec.k_width / spec.n_head_kv;
    const size_t dv = spec.v_width / spec.n_head_kv;
    const size_t kvh = head / (n_head / spec.n_head_kv);
    const size_t last = batch.last ? batch.last[t] : token;
    const RowRange rows = kv.rows_for_query(il, token, last);  // physical bounds
    CACTUS_ASSERT(rows.begin <= rows.end && rows.end <= kv.capacity(il));
    const AttentionQueries aq = {q + head * dk, dk, out + head * dv, dv, n_q};
    const AttentionShape shape = {kv.row_positions(il) + rows.begin, rows.end - rows.begin, dk, dv, scale,
                                  kv.mask_for(il, token, last)};
    if (kv.type() == KvType::F16) {
        const KvRowsF16 k = {kv.k16(il, rows.begin) + kvh * dk, spec.k_width, kv.v16(il, rows.begin) + kvh * dv,
                             spec.v_width};
        attention_group(aq, k, shape, ws);
        return;
    }
    if (kv.type() == KvType::F32) {
        const KvRowsF32 k = {kv.k32(il, rows.begin) + kvh * dk, spec.k_width, kv.v32(il, rows.begin) + kvh * dv,
                             spec.v_width};
        attention_group(aq, k, shape, ws);
        return;
    }
    const size_t gph_k = kv_groups_of(dk);  // int8 scale groups per head
    const size_t gph_v = kv_groups_of(dv);
    const KvRowsQ8 k = {kv.k8(il, rows.begin) + kvh * dk,          spec.k_width,
                        kv.k_scales(il, rows.begin) + kvh * gph_k, kv.k_scale_stride(il),
                        kv.v8(il, rows.begin) + kvh * dv,          spec.v_width,
                        kv.v_scales(il, rows.begin) + kvh * gph_v, kv.v_scale_stride(il)};
    attention_group(aq, k, shape, ws);
}

void CpuBackend::attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& mask, const DenseAttention& s) {
    const size_t n_q = q.rows();
    const size_t n_kv = k.rows();
    if (s.n_head == 0 || s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0 || q.width() != s.n_head * s.head_dim ||
        k.width() != s.n_head_kv * s.head_dim || v.width() != s.n_head_kv * s.head_dim_v || v.rows() != n_kv ||
        out.rows() != n_q || out.width() != s.n_head * s.head_dim_v) {
        fail("attention_dense: shapes q [%zu, %zu] k [%zu, %zu] v [%zu, %zu] out [%zu, %zu] do not fit %zu/%zu heads",
             n_q, q.width(), n_kv, k.width(), v.rows(), v.width(), out.rows(), out.width(), s.n_head, s.n_head_kv);
    }
    if (!mask.empty() && (mask.type != DType::F32 || mask.width() != n_kv || mask.rows() != n_q)) {
        fail("attention_dense: mask must be f32 [%zu, %zu]", n_q, n_kv);
    }
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
