#pragma once
// What a backend sees of a KV cache: for one token of a step and one layer, where its rows live
// (the KvStorage the backend made), where this token's key and value go, which physical rows its
// query may read and how to mask them. KvCache (kv_cache.h) builds the views from its host
// bookkeeping (KvCache::view); a backend reads only the view, never the cache class, so the
// bookkeeping can change without touching a backend.
#include <cstddef>
#include <cstdint>

#include "kv/kv_storage.h"
#include "ops/ops_ref.h"

namespace cactus {

// Half-open range of physical rows.
struct RowRange {
    size_t begin = 0;
    size_t end = 0;
};

struct KvView {
    KvStorage* storage = nullptr;        // the rows (made by the backend: Backend::make_kv_storage)
    size_t layer = 0;                    // layer index in `storage`
    KvLayerLayout layout;                // widths, heads and physical rows of that layer
    size_t row = 0;                      // physical row of this token's key and value (kv_store)
    RowRange rows;                       // physical rows the token's query may see (attention_kv)
    const int32_t* positions = nullptr;  // [layout.capacity] position held by each row, -1 = empty (host)
    AttentionMask mask;                  // causal, sliding window, sinks, bidirectional span
};

// The tokens of one step, one view each, all of the same layer: token i of the batch is view[i].
// The views' storages all have one KvType (one kernel per launch).
struct KvBatch {
    size_t n = 0;
    const KvView* view = nullptr;  // [n]
};

}  // namespace cactus
