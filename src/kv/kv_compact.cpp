// Rolling KeyDiff compaction of the global layers (Park et al., "KeyDiff: key similarity-based KV
// cache eviction"): per KV head, the rows whose keys are least similar (cosine) to the mean of the
// normalised keys carry the most distinct information and are kept, besides the sink rows and the
// most recent rows. Kept rows are moved down in order (row j takes the j-th kept row, so every
// head has rows 0..to-1 again and row == position holds), and each moved key is re-rotated by its
// position change: RoPE(p') = R(p' - p) RoPE(p), in f32 (int8 rows: dequantize, rotate, quantize).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace cactus {

namespace {

// Indices (ascending) of the rows one head keeps out of n: sinks, the `middle` least similar
// candidates by score, and the most recent rows.
std::vector<size_t> kept_rows(const std::vector<float>& cosine, size_t n, size_t sinks, size_t recent, size_t middle) {
    std::vector<size_t> candidates(n - sinks - recent);
    std::iota(candidates.begin(), candidates.end(), sinks);
    // By score, ties by row (what a stable sort of the ascending rows gives; std::sort needs no
    // temporary buffer, whose sized delete clang's ASan misreports against libstdc++ 12); a NaN
    // score sorts last, so such a row is the first dropped, and the order stays strict.
    auto score = [&](size_t r) { return std::isnan(cosine[r]) ? INFINITY : cosine[r]; };
    std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
        const float sa = score(a), sb = score(b);
        return sa < sb || (sa == sb && a < b);
    });
    candidates.resize(middle);
    std::sort(candidates.begin(), candidates.end());
    std::vector<size_t> kept;
    kept.reserve(sinks + middle + recent);
    for (size_t r = 0; r < sinks; ++r) kept.push_back(r);
    kept.insert(kept.end(), candidates.begin(), candidates.end());
    for (size_t r = n - recent; r < n; ++r) kept.push_back(r);
    return kept;
}

}  // namespace

void KvCache::compact_all() {
    const size_t before = global_rows();
    CACTUS_ASSERT(config_.kv.compress.enabled && before > config_.kv.compress.to);
    for (size_t il = 0; il < layers_.size(); ++il) {
        if (!layers_[il].ring) compact_layer(il);
    }
    global_offset_ += before - config_.kv.compress.to;
    truncate_floor_ = n_tokens_;
    ++compactions_;
}

void KvCache::compact_layer(size_t il) {
    Layer& layer = layers_[il];
    const KvCompressOptions& c = config_.kv.compress;
    const size_t n = layer.used;
    CACTUS_ASSERT(n == global_rows() && n <= layer.capacity && c.to < n);
    const size_t sinks = std::min(c.sinks, c.to);
    const size_t recent = std::min(c.recent, c.to - sinks);
    const size_t middle = c.to - sinks - recent;
    const size_t hk = layer.head_dim_k;
    std::vector<float> key(hk);
    std::vector<float> mean(hk);
    std::vector<float> cosine(n);
    for (size_t h = 0; h < layer.spec.n_head_kv; ++h) {
        // Mean of the normalised keys: [head_dim_k].
        std::fill(mean.begin(), mean.end(), 0.0f);
        std::vector<float> norms(n);
        for (size_t r = 0; r < n; ++r) {
            storage_->read_head(il, r, h, true, key.data());
            double ss = 0.0;
            for (float x : key) ss += static_cast<double>(x) * x;
            norms[r] = static_cast<float>(std::sqrt(ss));
            const float inv = norms[r] > 0.0f ? 1.0f / norms[r] : 0.0f;
            for (size_t i = 0; i < hk; ++i) mean[i] += key[i] * inv;
        }
        double mean_ss = 0.0;
        for (float x : mean) mean_ss += static_cast<double>(x) * x;
        const double mean_norm = std::sqrt(mean_ss);
        for (size_t r = 0; r < n; ++r) {
            storage_->read_head(il, r, h, true, key.data());
            double dot = 0.0;
            for (size_t i = 0; i < hk; ++i) dot += static_cast<double>(key[i]) * mean[i];
            const double denom = static_cast<double>(norms[r]) * mean_norm;
            cosine[r] = denom > 0.0 ? static_cast<float>(dot / denom) : 0.0f;
        }
        const std::vector<size_t> kept = kept_rows(cosine, n, sinks, recent, middle);
        CACTUS_ASSERT(kept.size() == c.to);
        for (size_t j = 0; j < kept.size(); ++j) {
            const size_t src = kept[j];
            CACTUS_ASSERT(src >= j && src < n);
            if (src == j) continue;
            storage_->move_head(il, j, src, h);
            if (layer.spec.rope.n_rot == 0) continue;
            storage_->read_head(il, j, h, true, key.data());
            rope_ref(key.data(), 1, hk, static_cast<int32_t>(j) - static_cast<int32_t>(src), layer.spec.rope);
            storage_->write_head(il, j, h, true, key.data());
        }
    }
    for (size_t r = 0; r < layer.capacity; ++r) layer.row_pos[r] = r < c.to ? static_cast<int32_t>(r) : -1;
    layer.used = c.to;
}

}  // namespace cactus
