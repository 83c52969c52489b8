#pragma once
// HostKvStorage: the rows of a KV cache in host memory, as the CPU backend's attention reads them
// (layout: src/kv/kv_storage.h). Made by CpuBackend::make_kv_storage and make_host_kv_storage.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/kv_storage.h"

namespace cactus {

// Rows in host memory, for caches made without a backend (tests, tools): KvCache's storage factory.
std::unique_ptr<KvStorage> make_host_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type);

class HostKvStorage final : public KvStorage {
public:
    HostKvStorage(const std::vector<KvLayerLayout>& layers, KvType type);
    static size_t predict_bytes(const KvLayerLayout& layer, KvType type);  // kv_storage_bytes

    KvType type() const override { return type_; }
    void write_row(size_t il, size_t row, const float* k, const float* v) override;
    void read_head(size_t il, size_t row, size_t head, bool key, float* out) const override;
    void write_head(size_t il, size_t row, size_t head, bool key, const float* in) override;
    void move_head(size_t il, size_t dst, size_t src, size_t head) override;
    size_t bytes() const override;

    // Raw rows for the CPU attention kernels. f16: k16/v16; int8: k8/v8 plus scales; f32: k32/v32.
    const uint16_t* k16(size_t il, size_t row) const {
        return layers_[il].k16.data() + row * layers_[il].layout.k_width;
    }
    const uint16_t* v16(size_t il, size_t row) const {
        return layers_[il].v16.data() + row * layers_[il].layout.v_width;
    }
    const float* k32(size_t il, size_t row) const { return layers_[il].k32.data() + row * layers_[il].layout.k_width; }
    const float* v32(size_t il, size_t row) const { return layers_[il].v32.data() + row * layers_[il].layout.v_width; }
    const int8_t* k8(size_t il, size_t row) const { return layers_[il].k8.data() + row * layers_[il].layout.k_width; }
    const int8_t* v8(size_t il, size_t row) const { return layers_[il].v8.data() + row * layers_[il].layout.v_width; }
    const float* k_scales(size_t il, size_t row) const { return layers_[il].ks.data() + row * layers_[il].k_groups; }
    const float* v_scales(size_t il, size_t row) const { return layers_[il].vs.data() + row * layers_[il].v_groups; }
    size_t k_scale_stride(size_t il) const { return layers_[il].k_groups; }
    size_t v_scale_stride(size_t il) const { return layers_[il].v_groups; }

private:
    struct Layer {
        KvLayerLayout layout;
        size_t head_dim_k = 0;
        size_t head_dim_v = 0;
        size_t k_groups = 0;  // scales per key row (int8)
        size_t v_groups = 0;
        std::vector<uint16_t> k16, v16;  // [capacity, k_width], [capacity, v_width] (f16)
        std::vector<int8_t> k8, v8;      // same shapes (int8)
        std::vector<float> ks, vs;       // [capacity, k_groups], [capacity, v_groups] (int8)
        std::vector<float> k32, v32;     // [capacity, k_width], [capacity, v_width] (f32)
    };
    KvType type_;
    std::vector<Layer> layers_;
};

}  // namespace cactus
