#include "kv/kv_storage.h"

namespace cactus {

size_t kv_groups_of(size_t n) { return (n + kKvGroup - 1) / kKvGroup; }

size_t kv_storage_bytes(const KvLayerLayout& l, KvType type) {
    const size_t hk = l.k_width / l.n_head_kv;
    const size_t hv = l.v_width / l.n_head_kv;
    size_t per_row = 0;
    switch (type) {
        case KvType::F16:
            per_row = (l.k_width + l.v_width) * sizeof(uint16_t);
            break;
        case KvType::F32:
            per_row = (l.k_width + l.v_width) * sizeof(float);
            break;
        case KvType::I8:
            per_row = l.k_width + l.v_width + l.n_head_kv * (kv_groups_of(hk) + kv_groups_of(hv)) * sizeof(float);
            break;
    }
    return per_row * l.capacity;
}

}  // namespace cactus
