#include "kv/kv_cache.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace cactus {

KvCache::KvCache(std::vector<KvLayerSpec> layers, size_t n_ctx) : n_ctx_(n_ctx) {
    if (n_ctx == 0) fail("KvCache: n_ctx must be > 0");
    if (n_ctx > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail("KvCache: n_ctx %zu exceeds the position range", n_ctx);
    }
    constexpr size_t kMaxElements = size_t(1) << 36;  // 128 GiB of halves: refuse before allocating
    layers_.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
        const KvLayerSpec& spec = layers[il];
        if (spec.k_width == 0 || spec.v_width == 0) fail("KvCache: layer %zu has an empty row", il);
        if (spec.k_width > kMaxElements / n_ctx || spec.v_width > kMaxElements / n_ctx) {
            fail("KvCache: layer %zu: %zu x (%zu + %zu) halves is too large", il, n_ctx,
                 spec.k_width, spec.v_width);
        }
        Layer& layer = layers_[il];
        layer.spec = spec;
        layer.k.assign(n_ctx * spec.k_width, 0);
        layer.v.assign(n_ctx * spec.v_width, 0);
        layer.row_pos.assign(n_ctx, -1);
    }
}

size_t KvCache::append(size_t n) {
    if (n > n_ctx_ - n_past_) {
        fail("KvCache::append: %zu tokens after %zu exceed the context of %zu tokens", n, n_past_,
             n_ctx_);
    }
    const size_t first = n_past_;
    for (size_t il = 0; il < layers_.size(); ++il) {
        for (size_t pos = first; pos < first + n; ++pos) {
            layers_[il].row_pos[pos] = static_cast<int32_t>(pos);
        }
    }
    n_past_ += n;
    return first;
}

void KvCache::truncate(size_t n) {
    if (n > n_past_) fail("KvCache::truncate: %zu is beyond the %zu cached tokens", n, n_past_);
    for (Layer& layer : layers_) {
        std::fill(layer.row_pos.begin() + static_cast<std::ptrdiff_t>(n),
                  layer.row_pos.begin() + static_cast<std::ptrdiff_t>(n_past_), -1);
    }
    n_past_ = n;
}

size_t KvCache::row_of(size_t il, size_t pos) const {
    CACTUS_ASSERT(il < layers_.size() && pos < n_past_);
    return pos;
}

RowRange KvCache::rows_for_queries(size_t il, size_t pos_lo, size_t pos_hi) const {
    CACTUS_ASSERT(il < layers_.size() && pos_lo <= pos_hi);
    const uint32_t window = layers_[il].spec.window;
    RowRange range;
    range.begin = (window != 0 && pos_lo + 1 > window) ? pos_lo + 1 - window : 0;
    range.end = std::min(pos_hi + 1, n_past_);
    if (range.begin > range.end) range.begin = range.end;
    return range;
}

size_t KvCache::bytes() const {
    size_t total = 0;
    for (const Layer& layer : layers_) {
        total += (layer.k.size() + layer.v.size()) * sizeof(uint16_t) +
                 layer.row_pos.size() * sizeof(int32_t);
    }
    return total;
}

}  // namespace cactus
