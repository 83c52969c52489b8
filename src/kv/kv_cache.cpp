#include "kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "ops/quant.h"

namespace cactus {

namespace {

constexpr size_t kMaxElements = size_t(1) << 36;  // refuse absurd caches before allocating

// Physical rows of a layer under this configuration.
size_t layer_capacity(const KvLayerSpec& spec, const KvCacheConfig& c, size_t ring_chunk) {
    if (spec.window != 0) return spec.sinks + spec.window + ring_chunk - 1;
    return c.kv.compress.enabled ? c.kv.compress.at : c.n_ctx;
}

size_t ring_chunk_of(const std::vector<KvLayerSpec>& layers, const KvCacheConfig& c) {
    size_t chunk = 0;
    const size_t wanted = c.max_chunk ? c.max_chunk : c.n_ctx;
    for (const KvLayerSpec& s : layers) {
        if (s.window != 0) chunk = chunk ? std::min<size_t>(chunk, s.window) : std::min<size_t>(wanted, s.window);
    }
    return chunk;
}

void check_spec(const KvLayerSpec& spec, size_t il) {
    if (spec.k_width == 0 || spec.v_width == 0) fail("KvCache: layer %zu has an empty row", il);
    if (spec.n_head_kv == 0 || spec.k_width % spec.n_head_kv != 0 || spec.v_width % spec.n_head_kv != 0) {
        fail("KvCache: layer %zu: rows of %zu/%zu elements do not split into %zu heads", il, spec.k_width, spec.v_width,
             spec.n_head_kv);
    }
    if (spec.rope.n_rot % 2 != 0 || spec.rope.n_rot > spec.k_width / spec.n_head_kv) {
        fail("KvCache: layer %zu: rope dimension %zu does not fit the head", il, spec.rope.n_rot);
    }
    if (spec.window == 0 && spec.sinks != 0) fail("KvCache: layer %zu: sinks need a sliding window", il);
}

}  // namespace

void kv_quantize_i8(int8_t* q, float* scales, const float* x, size_t n) {
    for (size_t g = 0; g * kKvGroup < n; ++g) {
        const size_t begin = g * kKvGroup;
        const size_t end = std::min(n, begin + kKvGroup);
        float amax = 0.0f;
        for (size_t i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(x[i]));
        const float scale = amax / 127.0f;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        scales[g] = scale;
        for (size_t i = begin; i < end; ++i) {
            const float r = std::nearbyint(x[i] * inv);
            q[i] = static_cast<int8_t>(std::fmax(-127.0f, std::fmin(127.0f, r)));
        }
    }
}

void kv_dequantize_i8(float* x, const int8_t* q, const float* scales, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = scales[i / kKvGroup] * static_cast<float>(q[i]);
}

KvCache::KvCache(std::vector<KvLayerSpec> layers, const KvCacheConfig& config, const KvStorageFactory& make_storage)
    : config_(config) {
    if (config_.n_ctx == 0) fail("KvCache: n_ctx must be > 0");
    if (config_.n_ctx > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail("KvCache: n_ctx %zu exceeds the position range", config_.n_ctx);
    }
    const KvCompressOptions& c = config_.kv.compress;
    if (c.enabled && (c.to == 0 || c.to >= c.at || c.at > config_.n_ctx || c.sinks + c.recent > c.to)) {
        fail("KvCache: compaction %zu -> %zu (sinks %zu, recent %zu) does not fit n_ctx %zu", c.at, c.to, c.sinks,
             c.recent, config_.n_ctx);
    }
    ring_chunk_ = ring_chunk_of(layers, config_);
    layers_.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
        check_spec(layers[il], il);
        init_layer(layers_[il], layers[il]);
        has_global_ = has_global_ || layers[il].window == 0;
    }
    std::vector<KvLayerLayout> layouts;
    for (const Layer& l : layers_) layouts.push_back(layout_of(l.spec, l.capacity));
    storage_ = make_storage(layouts, config_.kv.type);
    CACTUS_ASSERT(storage_ && storage_->type() == config_.kv.type);
}

KvCache::~KvCache() = default;

size_t KvCache::predict_bytes(const std::vector<KvLayerSpec>& layers, const KvCacheConfig& config) {
    const size_t chunk = ring_chunk_of(layers, config);
    size_t total = 0;
    for (const KvLayerSpec& s : layers) {
        const size_t capacity = layer_capacity(s, config, chunk);
        total += kv_storage_bytes(layout_of(s, capacity), config.kv.type) + capacity * sizeof(int32_t);
    }
    return total;
}

void KvCache::init_layer(Layer& layer, const KvLayerSpec& spec) const {
    layer.spec = spec;
    layer.ring = spec.window != 0;
    layer.capacity = layer_capacity(spec, config_, ring_chunk_);
    layer.head_dim_k = spec.k_width / spec.n_head_kv;
    layer.head_dim_v = spec.v_width / spec.n_head_kv;
    const size_t cap = layer.capacity;
    if (spec.k_width > kMaxElements / cap || spec.v_width > kMaxElements / cap) {
        fail("KvCache: %zu rows x (%zu + %zu) elements is too large", cap, spec.k_width, spec.v_width);
    }
    layer.row_pos.assign(cap, -1);
}

size_t KvCache::max_capacity() const {
    size_t m = 0;
    for (const Layer& l : layers_) m = std::max(m, l.capacity);
    return m;
}

size_t KvCache::reserve(size_t wanted) {
    if (wanted == 0) fail("KvCache::reserve: no tokens");
    size_t room = wanted;
    if (ring_chunk_ != 0) room = std::min(room, ring_chunk_);
    if (has_global_) {
        const KvCompressOptions& c = config_.kv.compress;
        const size_t limit = c.enabled ? c.at : config_.n_ctx;
        if (global_rows() >= limit) {
            if (!c.enabled) {
                fail(
                    "KvCache: the conversation has %zu tokens and fills the context (n_ctx %zu) with "
                    "kv_compress off; raise n_ctx, turn kv_compress on or start a new conversation",
                    n_tokens_, config_.n_ctx);
            }
            compact_all();
        }
        room = std::min(room, limit - global_rows());
    }
    if (n_tokens_ + room > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail("KvCache: the session exceeds 2^31 tokens; reset it");
    }
    return room;
}

size_t KvCache::append(size_t n) {
    if (n == 0) fail("KvCache::append: no tokens");
    if (ring_chunk_ != 0 && n > ring_chunk_) {
        fail("KvCache::append: %zu tokens exceed the chunk of %zu the sliding rings hold", n, ring_chunk_);
    }
    if (has_global_) {
        const KvCompressOptions& c = config_.kv.compress;
        const size_t limit = c.enabled ? c.at : config_.n_ctx;
        if (n > limit - global_rows()) {
            fail("KvCache::append: %zu tokens after %zu exceed the context of %zu tokens", n, n_tokens_, limit);
        }
    }
    const size_t first = n_tokens_;
    n_tokens_ += n;
    for (size_t il = 0; il < layers_.size(); ++il) {
        Layer& layer = layers_[il];
        if (layer.ring) {
            const size_t ring_len = layer.capacity - layer.spec.sinks;
            if (n_tokens_ > layer.spec.sinks + ring_len) layer.oldest = std::max(layer.oldest, n_tokens_ - ring_len);
        }
        for (size_t t = first; t < first + n; ++t) {
            const size_t row = row_of(il, t);
            CACTUS_ASSERT(row < layer.capacity);
            layer.row_pos[row] = position(il, t);
            layer.used = std::max(layer.used, row + 1);
        }
    }
    return first;
}

bool KvCache::ring_can_truncate(const Layer& layer, size_t n) const {
    // The next query (token n) needs tokens [n - window + 1, n) besides the sinks.
    const size_t sinks = layer.spec.sinks;
    const size_t oldest = std::max(sinks, layer.oldest);
    const size_t needed = std::max(sinks, n + 1 > layer.spec.window ? n + 1 - layer.spec.window : size_t(0));
    return needed >= oldest || n == 0;
}

size_t KvCache::truncate(size_t n) {
    if (n > n_tokens_) fail("KvCache::truncate: %zu is beyond the %zu cached tokens", n, n_tokens_);
    bool exact = n >= truncate_floor_;
    for (const Layer& layer : layers_) {
        if (layer.ring && !ring_can_truncate(layer, n)) exact = false;
    }
    if (!exact) n = 0;
    for (size_t il = 0; il < layers_.size(); ++il) {
        Layer& layer = layers_[il];
        const int32_t limit = n == 0 ? 0 : position(il, n);  // first position dropped
        for (size_t row = 0; row < layer.used; ++row) {
            if (layer.row_pos[row] >= limit) layer.row_pos[row] = -1;
        }
        if (!layer.ring) layer.used = static_cast<size_t>(limit);
        if (n == 0) layer.used = layer.oldest = 0;
    }
    n_tokens_ = n;
    if (n == 0) {
        global_offset_ = 0;
        truncate_floor_ = 0;
    }
    return n;
}

int32_t KvCache::position(size_t il, size_t token) const {
    CACTUS_ASSERT(il < layers_.size());
    const Layer& layer = layers_[il];
    if (layer.ring) return static_cast<int32_t>(token);
    CACTUS_ASSERT(token >= global_offset_);
    return static_cast<int32_t>(token - global_offset_);
}

size_t KvCache::ring_row(const Layer& layer, size_t token) const {
    const size_t sinks = layer.spec.sinks;
    if (token < sinks) return token;
    return sinks + (token - sinks) % (layer.capacity - sinks);
}

size_t KvCache::row_of(size_t il, size_t token) const {
    CACTUS_ASSERT(il < layers_.size() && token < n_tokens_);
    const Layer& layer = layers_[il];
    const size_t row = layer.ring ? ring_row(layer, token) : static_cast<size_t>(position(il, token));
    CACTUS_ASSERT(row < layer.capacity);
    return row;
}

RowRange KvCache::rows_for_query(size_t il, size_t token, size_t last) const {
    CACTUS_ASSERT(il < layers_.size() && token <= last && last < n_tokens_);
    const Layer& layer = layers_[il];
    RowRange r;
    r.end = layer.ring ? layer.used : std::min(layer.used, static_cast<size_t>(position(il, last)) + 1);
    CACTUS_ASSERT(r.end <= layer.capacity);
    return r;
}

AttentionMask KvCache::mask_for(size_t il, size_t token, size_t last) const {
    CACTUS_ASSERT(token <= last && last < n_tokens_);
    AttentionMask mask;
    mask.q_pos = position(il, token);
    mask.ahead = static_cast<uint32_t>(last - token);
    mask.window = layers_[il].spec.window;
    mask.sinks = layers_[il].spec.sinks;
    return mask;
}

void KvCache::write_row(size_t il, size_t row, const float* k, const float* v) {
    CACTUS_ASSERT(il < layers_.size() && row < layers_[il].capacity);
    storage_->write_row(il, row, k, v);
}

void KvCache::read_row(size_t il, size_t row, float* k, float* v) const {
    const Layer& layer = layers_[il];
    CACTUS_ASSERT(row < layer.capacity);
    for (size_t h = 0; h < layer.spec.n_head_kv; ++h) {
        storage_->read_head(il, row, h, true, k + h * layer.head_dim_k);
        storage_->read_head(il, row, h, false, v + h * layer.head_dim_v);
    }
}

KvView KvCache::view(size_t il, size_t token, size_t last) const {
    CACTUS_ASSERT(il < layers_.size());
    const Layer& layer = layers_[il];
    KvView v;
    v.storage = storage_.get();
    v.layer = il;
    v.layout = layout_of(layer.spec, layer.capacity);
    v.row = row_of(il, token);
    v.rows = rows_for_query(il, token, last);
    v.positions = layer.row_pos.data();
    v.mask = mask_for(il, token, last);
    return v;
}

KvBatch kv_batch(const KvTokens& tokens, size_t il, std::vector<KvView>& views) {
    views.resize(tokens.n);
    for (size_t i = 0; i < tokens.n; ++i) {
        const size_t token = tokens.token[i];
        views[i] = tokens.cache[i]->view(il, token, tokens.last ? tokens.last[i] : token);
    }
    return KvBatch{tokens.n, views.data()};
}

size_t KvCache::bytes() const {
    size_t total = storage_->bytes();
    for (const Layer& l : layers_) total += l.row_pos.size() * sizeof(int32_t);
    return total;
}

KvLayerLayout layout_of(const KvLayerSpec& spec, size_t capacity) {
    KvLayerLayout l;
    l.k_width = spec.k_width;
    l.v_width = spec.v_width;
    l.n_head_kv = spec.n_head_kv;
    l.capacity = capacity;
    return l;
}

}  // namespace cactus
