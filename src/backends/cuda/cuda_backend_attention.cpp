// CudaBackend: KV storage in device memory (f16, int8 rows with group scales, or f32), the KV store,
// attention over the caches, dense attention and the convolutions (im2col + matmul).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_backend.h"

#include <climits>

#include "core/error.h"
#include "kv/kv_cache.h"  // kv_quantize_i8
#include "ops/quant.h"

namespace cactus {

namespace {

// Bytes of one row element of a KV type (int8 scales apart).
size_t kv_element_bytes(KvType type) {
    switch (type) {
        case KvType::F16:
            return sizeof(uint16_t);
        case KvType::I8:
            return 1;
        case KvType::F32:
            return sizeof(float);
    }
    fail("cuda make_kv_storage: kv_cache_type %d is not a KV type", static_cast<int>(type));
}

}  // namespace

// The rows of a KV cache in device memory; KvCache keeps the bookkeeping on the host. Row
// operations of compaction (read / write / move one head) are copies through the backend.
class CudaKvStorage final : public KvStorage {
public:
    CudaKvStorage(CudaBackend& backend, const std::vector<KvLayerLayout>& layers, KvType type)
        : be_(backend), type_(type) {
        for (const KvLayerLayout& l : layers) {
            CACTUS_ASSERT(l.n_head_kv > 0 && l.k_width % l.n_head_kv == 0 && l.v_width % l.n_head_kv == 0);
            Layer layer;
            layer.layout = l;
            layer.hk = l.k_width / l.n_head_kv;
            layer.hv = l.v_width / l.n_head_kv;
            layer.k_groups = l.n_head_kv * kv_groups_of(layer.hk);
            layer.v_groups = l.n_head_kv * kv_groups_of(layer.hv);
            const size_t elem = kv_element_bytes(type);
            layer.k = be_.alloc(l.capacity * l.k_width * elem);
            layer.v = be_.alloc(l.capacity * l.v_width * elem);
            if (type == KvType::I8) {
                layer.ks = be_.alloc(l.capacity * layer.k_groups * sizeof(float));
                layer.vs = be_.alloc(l.capacity * layer.v_groups * sizeof(float));
            }
            bytes_ += kv_storage_bytes(l, type);
            layers_.push_back(std::move(layer));
        }
    }

    KvType type() const override { return type_; }
    size_t bytes() const override { return bytes_; }

    void write_row(size_t il, size_t row, const float* k, const float* v) override {
        const Layer& l = layers_.at(il);
        for (size_t h = 0; h < l.layout.n_head_kv; ++h) {
            write_head(il, row, h, true, k + h * l.hk);
            write_head(il, row, h, false, v + h * l.hv);
        }
    }

    void read_head(size_t il, size_t row, size_t head, bool key, float* out) const override {
        const Slot s = slot(il, row, head, key);
        if (type_ == KvType::F16) {
            std::vector<uint16_t> h(s.dim);
            be_.download_raw(h.data(), s.data, s.dim * sizeof(uint16_t));
            for (size_t i = 0; i < s.dim; ++i) out[i] = fp16_to_fp32(h[i]);
            return;
        }
        if (type_ == KvType::F32) {
            be_.download_raw(out, s.data, s.dim * sizeof(float));
            return;
        }
        std::vector<int8_t> q(s.dim);
        std::vector<float> scales(kv_groups_of(s.dim));
        be_.download_raw(q.data(), s.data, s.dim);
        be_.download_raw(scales.data(), s.scales, scales.size() * sizeof(float));
        kv_dequantize_i8(out, q.data(), scales.data(), s.dim);
    }

    void write_head(size_t il, size_t row, size_t head, bool key, const float* in) override {
        const Slot s = slot(il, row, head, key);
        if (type_ == KvType::F16) {
            std::vector<uint16_t> h(s.dim);
            for (size_t i = 0; i < s.dim; ++i) h[i] = fp32_to_fp16(in[i]);
            be_.upload_raw(s.data, h.data(), s.dim * sizeof(uint16_t));
            return;
        }
        if (type_ == KvType::F32) {
            be_.upload_raw(s.data, in, s.dim * sizeof(float));
            return;
        }
        std::vector<int8_t> q(s.dim);
        std::vector<float> scales(kv_groups_of(s.dim));
        kv_quantize_i8(q.data(), scales.data(), in, s.dim);
        be_.upload_raw(s.data, q.data(), s.dim);
        be_.upload_raw(s.scales, scales.data(), scales.size() * sizeof(float));
    }

    void move_head(size_t il, size_t dst, size_t src, size_t head) override {
        if (dst == src) return;
        for (bool key : {true, false}) {
            const Slot d = slot(il, dst, head, key);
            const Slot s = slot(il, src, head, key);
            be_.copy_raw(d.data, s.data, d.dim * kv_element_bytes(type_));
            if (type_ == KvType::I8) be_.copy_raw(d.scales, s.scales, kv_groups_of(d.dim) * sizeof(float));
        }
    }

    // Device addresses of row `row` of layer il (head 0) for the kernels.
    cuda::KvStoreDesc row(size_t il, size_t r) const {
        const Layer& l = layers_.at(il);
        CACTUS_ASSERT(r <= l.layout.capacity);  // == capacity: the end of an empty range
        const size_t elem = kv_element_bytes(type_);
        cuda::KvStoreDesc d;
        d.k = static_cast<char*>(l.k->base()) + r * l.layout.k_width * elem;
        d.v = static_cast<char*>(l.v->base()) + r * l.layout.v_width * elem;
        if (type_ == KvType::I8) {
            d.ks = static_cast<float*>(l.ks->base()) + r * l.k_groups;
            d.vs = static_cast<float*>(l.vs->base()) + r * l.v_groups;
        }
        return d;
    }
    size_t k_groups(size_t il) const { return layers_.at(il).k_groups; }
    size_t v_groups(size_t il) const { return layers_.at(il).v_groups; }

private:
    struct Layer {
        KvLayerLayout layout;
        size_t hk = 0, hv = 0, k_groups = 0, v_groups = 0;
        std::unique_ptr<Buffer> k, v, ks, vs;
    };
    struct Slot {
        void* data;
        float* scales;
        size_t dim;
    };
    Slot slot(size_t il, size_t r, size_t head, bool key) const {
        const Layer& l = layers_.at(il);
        CACTUS_ASSERT(r < l.layout.capacity && head < l.layout.n_head_kv);
        const cuda::KvStoreDesc d = row(il, r);
        const size_t dim = key ? l.hk : l.hv;
        const size_t elem = kv_element_bytes(type_);
        float* scales = key ? d.ks : d.vs;
        return {static_cast<char*>(key ? d.k : d.v) + head * dim * elem,
                scales ? scales + head * kv_groups_of(dim) : nullptr, dim};
    }

    CudaBackend& be_;
    KvType type_;
    std::vector<Layer> layers_;
    size_t bytes_ = 0;
};

namespace {

CudaKvStorage& device_rows(const KvView& view, const char* op) {
    CudaKvStorage* s = dynamic_cast<CudaKvStorage*>(view.storage);
    if (s == nullptr) fail("cuda %s: the KV cache's rows were not made by the CUDA backend", op);
    return *s;
}

}  // namespace

std::unique_ptr<KvStorage> CudaBackend::make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) {
    usable("make_kv_storage");
    return std::make_unique<CudaKvStorage>(*this, layers, type);
}

void CudaBackend::do_kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v) {
    check_f32(k, "kv_store", "k");
    check_f32(v, "kv_store", "v");
    if (batch.n == 0) return;
    const KvLayerLayout& layout = batch.view[0].layout;
    const KvType type = batch.view[0].storage->type();  // one kernel per launch: every view has it (Backend)
    std::vector<cuda::KvStoreDesc> desc(batch.n);
    for (size_t t = 0; t < batch.n; ++t) {
        const KvView& view = batch.view[t];
        desc[t] = device_rows(view, "kv_store").row(view.layer, view.row);
    }
    usable("kv_store");
    const auto* d = static_cast<const cuda::KvStoreDesc*>(stage_upload(desc.data(), desc.size() * sizeof(desc[0])));
    launch("kv_store", [&](cudaStream_t s) {
        cuda::kv_store(s, d, k.as<float>(), v.as<float>(), batch.n, layout.k_width, layout.v_width, layout.n_head_kv,
                       type);
    });
}

void CudaBackend::do_attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head,
                                  float scale) {
    check_f32(out, "attention_kv", "out");
    check_f32(q, "attention_kv", "q");
    if (batch.n == 0) return;
    const KvView& first = batch.view[0];
    const KvLayerLayout& layout = first.layout;
    // The row positions each cache's queries need, once per cache (its positions array): [lo, hi)
    // over its tokens, brought up to date in the cache's device mirror.
    struct Span {
        const int32_t* positions;
        size_t lo, hi;
        const int32_t* dev = nullptr;
    };
    std::vector<Span> spans;
    std::vector<size_t> span_of(batch.n);
    for (size_t t = 0; t < batch.n; ++t) {
        const KvView& view = batch.view[t];
        size_t s = 0;
        while (s < spans.size() && spans[s].positions != view.positions) ++s;
        if (s == spans.size()) spans.push_back({view.positions, view.rows.begin, view.rows.end});
        spans[s].lo = std::min(spans[s].lo, view.rows.begin);
        spans[s].hi = std::max(spans[s].hi, view.rows.end);
        span_of[t] = s;
    }
    for (Span& s : spans) s.dev = position_rows(s.positions, layout.capacity, s.lo, s.hi);
    usable("attention_kv");
    const size_t base = stage(batch.n * sizeof(cuda::KvAttnDesc));
    auto* desc = reinterpret_cast<cuda::KvAttnDesc*>(pinned_ + base);
    for (size_t t = 0; t < batch.n; ++t) {
        const KvView& view = batch.view[t];
        const Span& s = spans[span_of[t]];
        const cuda::KvStoreDesc rows = device_rows(view, "attention_kv").row(view.layer, view.rows.begin);
        desc[t] = cuda::KvAttnDesc();
        desc[t].k = rows.k;
        desc[t].v = rows.v;
        desc[t].ks = rows.ks;
        desc[t].vs = rows.vs;
        desc[t].row_pos = s.dev + view.rows.begin;
        desc[t].n_rows = static_cast<int32_t>(view.rows.end - view.rows.begin);
        desc[t].q_pos = view.mask.q_pos;
        desc[t].window = view.mask.window;
        desc[t].sinks = view.mask.sinks;
        desc[t].ahead = view.mask.ahead;
    }
    stage_copy("attention_kv", base, batch.n * sizeof(cuda::KvAttnDesc));
    const auto* d = reinterpret_cast<const cuda::KvAttnDesc*>(twin_ + base);
    cuda::KvAttnShape shape;
    shape.n_head = n_head;
    shape.n_head_kv = layout.n_head_kv;
    shape.head_dim_k = layout.k_width / layout.n_head_kv;
    shape.head_dim_v = layout.v_width / layout.n_head_kv;
    shape.k_width = layout.k_width;
    shape.v_width = layout.v_width;
    shape.type = first.storage->type();
    const bool int8 = shape.type == KvType::I8;
    shape.k_groups = int8 ? device_rows(first, "attention_kv").k_groups(first.layer) : 0;
    shape.v_groups = int8 ? device_rows(first, "attention_kv").v_groups(first.layer) : 0;
    shape.scale = scale;
    shape.rows_aligned = true;
    for (size_t t = 0; t < batch.n; ++t) {
        shape.rows_aligned = shape.rows_aligned && (reinterpret_cast<uintptr_t>(desc[t].k) % 16 == 0) &&
                             (reinterpret_cast<uintptr_t>(desc[t].v) % 16 == 0);
    }
    bool shared_rows = true;
    for (size_t t = 1; t < batch.n; ++t) {
        const KvView& view = batch.view[t];
        shared_rows = shared_rows && view.storage == first.storage && view.layer == first.layer &&
                      view.rows.begin == first.rows.begin && view.positions == first.positions;
    }
    launch("attention_kv", [&](cudaStream_t s) {
        cuda::attention_kv(s, out.as<float>(), q.as<float>(), d, batch.n, shape, shared_rows);
    });
}

void CudaBackend::do_attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& mask, const DenseAttention& s) {
    check_f32(out, "attention_dense", "out");
    check_f32(q, "attention_dense", "q");
    check_f32(k, "attention_dense", "k");
    check_f32(v, "attention_dense", "v");
    const size_t n_q = q.rows();
    const size_t n_kv = k.rows();
    if (!mask.empty()) check_f32(mask, "attention_dense", "the mask");
    const float* md = mask.empty() ? nullptr : mask.as<float>();
    launch("attention_dense", [&](cudaStream_t st) {
        cuda::attention_dense(st, out.as<float>(), q.as<float>(), k.as<float>(), v.as<float>(), md, n_q, n_kv, s.n_head,
                              s.n_head_kv, s.head_dim, s.head_dim_v, s.scale, s.causal);
    });
}

const int32_t* CudaBackend::position_rows(const int32_t* host, size_t capacity, size_t lo, size_t hi) {
    auto it = mirrors_.find(host);
    if (it != mirrors_.end() && it->second.capacity != capacity) {
        mirrors_.erase(it);
        it = mirrors_.end();
    }
    if (it == mirrors_.end()) {
        if (mirrors_.size() >= kMaxMirrors) {
            mirrors_.erase(std::min_element(mirrors_.begin(), mirrors_.end(), [](const auto& a, const auto& b) {
                return a.second.last_used < b.second.last_used;
            }));
        }
        PositionMirror m;
        m.rows = alloc(std::max<size_t>(capacity, 1) * sizeof(int32_t));
        m.shadow.assign(capacity, INT32_MIN);  // unknown: no row holds this position
        m.capacity = capacity;
        it = mirrors_.emplace(host, std::move(m)).first;
    }
    PositionMirror& m = it->second;
    m.last_used = ++mirror_tick_;
    CACTUS_ASSERT(lo <= hi && hi <= capacity);
    size_t first = lo;
    while (first < hi && host[first] == m.shadow[first]) ++first;
    size_t last = hi;
    while (last > first && host[last - 1] == m.shadow[last - 1]) --last;
    auto* dev = static_cast<int32_t*>(m.rows->base());
    // The changed rows [first, last) go up through the side staging, straight onto the stream: before
    // the step's graph when it replays, in order when the step runs eagerly.
    for (size_t at = first; at < last;) {
        const size_t room = (kSideStaging - side_staged_) / sizeof(int32_t);
        if (room == 0) {
            synchronize(timeout_);
            continue;
        }
        const size_t n = std::min(last - at, room);
        int32_t* staged = reinterpret_cast<int32_t*>(side_pinned_ + side_staged_);
        std::memcpy(staged, host + at, n * sizeof(int32_t));
        check(cudaMemcpyAsync(dev + at, staged, n * sizeof(int32_t), cudaMemcpyHostToDevice, ctx_->stream),
              "attention_kv", "cudaMemcpyAsync (positions)");
        side_staged_ += (n * sizeof(int32_t) + 255) / 256 * 256;
        std::copy(host + at, host + at + n, m.shadow.begin() + static_cast<std::ptrdiff_t>(at));
        at += n;
    }
    return dev;
}

// ---- convolutions -----------------------------------------------------------------------------------

void CudaBackend::do_conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) {
    check_f32(y, "conv1d", "y");
    check_f32(x, "conv1d", "x");
    check_dev(w, "conv1d", "the weight");
    const size_t n_t = x.rows();
    const size_t n_in = x.width();
    const size_t n_t_out = (n_t + 2 * c.pad - c.kernel) / c.stride + 1;
    float* col = scratch(n_t_out * w.width());  // [n_t_out, n_in * kernel]
    launch("conv1d", [&](cudaStream_t s) {
        cuda::im2col_1d(s, col, x.as<float>(), n_t, n_in, n_t_out, c.kernel, c.stride, c.pad);
        const bool tiled =
            mmq_ && n_t_out > cuda::kGemvMaxTokens &&
            cuda::mmf(s, y.as<float>(), w.data(), w.type, w.row_bytes(), col, n_t_out, w.width(), w.rows());
        if (!tiled) cuda::matmul(s, y.as<float>(), w.data(), w.type, w.row_bytes(), col, n_t_out, w.width(), w.rows());
    });
    if (!b.empty()) do_add(y, y, b.reshaped(w.rows(), 1));
}

void CudaBackend::do_conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) {
    check_f32(y, "conv2d", "y");
    check_f32(x, "conv2d", "x");
    check_dev(w, "conv2d", "the weight");
    const size_t n_in = x.rows();
    const size_t h_out = (c.height + 2 * c.pad - c.kernel_h) / c.stride + 1;
    const size_t w_out = (c.width + 2 * c.pad - c.kernel_w) / c.stride + 1;
    float* col = scratch(h_out * w_out * w.width());
    launch("conv2d", [&](cudaStream_t s) {
        cuda::im2col_2d(s, col, x.as<float>(), n_in, c.height, c.width, h_out, w_out, c.kernel_h, c.kernel_w, c.stride,
                        c.pad);
        const size_t n = h_out * w_out;
        const bool tiled = mmq_ && n > cuda::kGemvMaxTokens &&
                           cuda::mmf(s, y.as<float>(), w.data(), w.type, w.row_bytes(), col, n, w.width(), w.rows());
        if (!tiled) cuda::matmul(s, y.as<float>(), w.data(), w.type, w.row_bytes(), col, n, w.width(), w.rows());
    });
    if (!b.empty()) do_add(y, y, b.reshaped(w.rows(), 1));
}

}  // namespace cactus
