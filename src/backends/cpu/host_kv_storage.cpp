#include "backends/cpu/host_kv_storage.h"

#include <cstring>
#include <memory>

#include "backends/cpu/attention_rows.h"
#include "core/error.h"
#include "kv/kv_cache.h"  // kv_quantize_i8
#include "ops/quant.h"

namespace cactus {

std::unique_ptr<KvStorage> make_host_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) {
    return std::make_unique<HostKvStorage>(layers, type);
}

size_t HostKvStorage::predict_bytes(const KvLayerLayout& l, KvType type) { return kv_storage_bytes(l, type); }

HostKvStorage::HostKvStorage(const std::vector<KvLayerLayout>& layers, KvType type) : type_(type) {
    layers_.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
        Layer& layer = layers_[il];
        const KvLayerLayout& l = layers[il];
        CACTUS_ASSERT(l.n_head_kv > 0 && l.k_width % l.n_head_kv == 0 && l.v_width % l.n_head_kv == 0);
        layer.layout = l;
        layer.head_dim_k = l.k_width / l.n_head_kv;
        layer.head_dim_v = l.v_width / l.n_head_kv;
        layer.k_groups = l.n_head_kv * kv_groups_of(layer.head_dim_k);
        layer.v_groups = l.n_head_kv * kv_groups_of(layer.head_dim_v);
        const size_t cap = l.capacity;
        if (type == KvType::F16) {
            layer.k16.assign(cap * l.k_width, 0);
            layer.v16.assign(cap * l.v_width, 0);
        } else if (type == KvType::F32) {
            layer.k32.assign(cap * l.k_width, 0.0f);
            layer.v32.assign(cap * l.v_width, 0.0f);
        } else {
            layer.k8.assign(cap * l.k_width, 0);
            layer.v8.assign(cap * l.v_width, 0);
            layer.ks.assign(cap * layer.k_groups, 0.0f);
            layer.vs.assign(cap * layer.v_groups, 0.0f);
        }
    }
}

void HostKvStorage::write_row(size_t il, size_t row, const float* k, const float* v) {
    const Layer& layer = layers_[il];
    CACTUS_ASSERT(row < layer.layout.capacity);
    for (size_t h = 0; h < layer.layout.n_head_kv; ++h) {
        write_head(il, row, h, true, k + h * layer.head_dim_k);
        write_head(il, row, h, false, v + h * layer.head_dim_v);
    }
}

void HostKvStorage::read_head(size_t il, size_t row, size_t head, bool key, float* out) const {
    const Layer& layer = layers_[il];
    CACTUS_ASSERT(row < layer.layout.capacity && head < layer.layout.n_head_kv);
    const size_t dim = key ? layer.head_dim_k : layer.head_dim_v;
    const size_t offset = row * (key ? layer.layout.k_width : layer.layout.v_width) + head * dim;
    if (type_ == KvType::F16) {
        const uint16_t* src = (key ? layer.k16 : layer.v16).data() + offset;
        for (size_t i = 0; i < dim; ++i) out[i] = fp16_to_fp32(src[i]);
        return;
    }
    if (type_ == KvType::F32) {
        std::memcpy(out, (key ? layer.k32 : layer.v32).data() + offset, dim * sizeof(float));
        return;
    }
    const size_t groups = key ? layer.k_groups : layer.v_groups;
    const float* scales = (key ? layer.ks : layer.vs).data() + row * groups + head * kv_groups_of(dim);
    kv_dequantize_i8(out, (key ? layer.k8 : layer.v8).data() + offset, scales, dim);
}

void HostKvStorage::write_head(size_t il, size_t row, size_t head, bool key, const float* in) {
    Layer& layer = layers_[il];
    CACTUS_ASSERT(row < layer.layout.capacity && head < layer.layout.n_head_kv);
    const size_t dim = key ? layer.head_dim_k : layer.head_dim_v;
    const size_t offset = row * (key ? layer.layout.k_width : layer.layout.v_width) + head * dim;
    if (type_ == KvType::F16) {
        uint16_t* dst = (key ? layer.k16 : layer.v16).data() + offset;
        attention_row_kernels().to_half(dst, in, dim);
        return;
    }
    if (type_ == KvType::F32) {
        std::memcpy((key ? layer.k32 : layer.v32).data() + offset, in, dim * sizeof(float));
        return;
    }
    const size_t groups = key ? layer.k_groups : layer.v_groups;
    float* scales = (key ? layer.ks : layer.vs).data() + row * groups + head * kv_groups_of(dim);
    kv_quantize_i8((key ? layer.k8 : layer.v8).data() + offset, scales, in, dim);
}

void HostKvStorage::move_head(size_t il, size_t dst, size_t src, size_t head) {
    Layer& layer = layers_[il];
    CACTUS_ASSERT(dst < layer.layout.capacity && src < layer.layout.capacity && head < layer.layout.n_head_kv);
    const size_t hk = layer.head_dim_k;
    const size_t hv = layer.head_dim_v;
    const size_t kw = layer.layout.k_width;
    const size_t vw = layer.layout.v_width;
    if (type_ == KvType::F16) {
        std::memmove(&layer.k16[dst * kw + head * hk], &layer.k16[src * kw + head * hk], hk * sizeof(uint16_t));
        std::memmove(&layer.v16[dst * vw + head * hv], &layer.v16[src * vw + head * hv], hv * sizeof(uint16_t));
        return;
    }
    if (type_ == KvType::F32) {
        std::memmove(&layer.k32[dst * kw + head * hk], &layer.k32[src * kw + head * hk], hk * sizeof(float));
        std::memmove(&layer.v32[dst * vw + head * hv], &layer.v32[src * vw + head * hv], hv * sizeof(float));
        return;
    }
    std::memmove(&layer.k8[dst * kw + head * hk], &layer.k8[src * kw + head * hk], hk);
    std::memmove(&layer.v8[dst * vw + head * hv], &layer.v8[src * vw + head * hv], hv);
    const size_t gk = kv_groups_of(hk);
    const size_t gv = kv_groups_of(hv);
    std::memmove(&layer.ks[dst * layer.k_groups + head * gk], &layer.ks[src * layer.k_groups + head * gk],
                 gk * sizeof(float));
    std::memmove(&layer.vs[dst * layer.v_groups + head * gv], &layer.vs[src * layer.v_groups + head * gv],
                 gv * sizeof(float));
}

size_t HostKvStorage::bytes() const {
    size_t total = 0;
    for (const Layer& l : layers_) {
        total += l.k16.size() * sizeof(uint16_t) + l.v16.size() * sizeof(uint16_t) + l.k8.size() + l.v8.size() +
                 (l.ks.size() + l.vs.size() + l.k32.size() + l.v32.size()) * sizeof(float);
    }
    return total;
}

}  // namespace cactus
