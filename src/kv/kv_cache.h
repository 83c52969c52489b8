#pragma once
// The KV cache of a decoder: per layer, keys (after RoPE) and values, stored as IEEE half rows, as
// int8 rows with one f32 scale per group of kKvGroup elements along the head dimension, or as f32
// rows (kv_options.h: KvType).
//
// Tokens, positions and rows are three different things:
//  - a token index t counts every token appended in the session (0, 1, 2, ...; n_past() of them);
//  - a layer's position of token t is what RoPE and the causal mask see: t in sliding layers,
//    t - (rows dropped by compaction) in global layers;
//  - a physical row is where the layer stores it. Every layer keeps `row_pos` (the position held by
//    each physical row, -1 = empty) and attention masks by positions, never by row index.
//
// Layouts:
//  - global layers (window 0): row == position; they hold up to n_ctx rows, or kv_compress_at rows
//    with compaction on. Compaction (KeyDiff) keeps `to` rows and renumbers them 0..to-1, so the
//    invariant row == position holds again; keys are re-rotated by their position change.
//  - sliding layers (window w): a ring of sinks + w + chunk - 1 rows (chunk = the largest append,
//    at most w), so a whole chunk can be written before its attention runs without overwriting a
//    row any query of the chunk still needs. Memory does not grow with the conversation.
// Kernels only ever receive row ranges inside the physical capacity (asserted).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kv/kv_options.h"
#include "kv/kv_storage.h"
#include "kv/kv_view.h"
#include "ops/ops_ref.h"

namespace cactus {

struct KvLayerSpec {
    size_t k_width = 0;    // n_head_kv * head_dim_k elements per key row
    size_t v_width = 0;    // n_head_kv * head_dim_v elements per value row
    uint32_t window = 0;   // sliding window in tokens; 0 = global attention
    size_t n_head_kv = 1;  // heads per row (int8 groups and compaction work per head)
    RopeParams rope;       // how the keys were rotated (re-rotation on compaction); n_rot 0 = none
    uint32_t sinks = 0;    // sliding rings only: first rows never overwritten, visible to all queries
};

struct KvCacheConfig {
    size_t n_ctx = 0;      // tokens a global layer holds (without compaction)
    size_t max_chunk = 0;  // largest append; 0 = n_ctx
    KvOptions kv;
};

// Makes the storage of the rows (the backend's: Backend::make_kv_storage).
using KvStorageFactory = std::function<std::unique_ptr<KvStorage>(const std::vector<KvLayerLayout>&, KvType)>;

class KvCache {
public:
    // Rows in the storage `make_storage` returns (a backend's; tests without a backend pass
    // make_host_kv_storage, src/backends/cpu/host_kv_storage.h). Throws cactus::Error when n_ctx is
    // 0, a spec is inconsistent or the cache would not fit.
    KvCache(std::vector<KvLayerSpec> layers, const KvCacheConfig& config, const KvStorageFactory& make_storage);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    // Bytes the cache of these layers takes (what bytes() will report), without allocating.
    static size_t predict_bytes(const std::vector<KvLayerSpec>& layers, const KvCacheConfig& config);

    size_t n_layer() const { return layers_.size(); }
    size_t n_past() const { return n_tokens_; }  // tokens appended in the session
    size_t n_ctx() const { return config_.n_ctx; }
    KvType type() const { return config_.kv.type; }
    const KvCompressOptions& compress() const { return config_.kv.compress; }
    const KvLayerSpec& spec(size_t il) const { return layers_[il].spec; }
    size_t capacity(size_t il) const { return layers_[il].capacity; }  // physical rows
    size_t max_capacity() const;
    size_t compactions() const { return compactions_; }
    // Tokens appended since the last compaction is the range truncate() restores exactly.
    size_t truncate_floor() const { return truncate_floor_; }

    // Makes room for up to `wanted` more tokens (compacting global layers that reached
    // kv_compress_at) and returns how many may be appended now (1 .. wanted). Throws when a global
    // layer is full and compaction is off.
    size_t reserve(size_t wanted);
    // Claims tokens [n_past, n_past + n) in every layer (n <= reserve(n)) and returns n_past before
    // the call. The caller then writes their rows (row_of, write_row).
    size_t append(size_t n);
    // Drops tokens >= n. Returns the tokens kept: n when the layout can restore that state exactly,
    // else 0 (everything dropped; the caller recomputes). See docs/LONG_CONTEXT.md.
    size_t truncate(size_t n);
    void clear() { truncate(0); }

    // Position of token t in layer il (RoPE angle and mask).
    int32_t position(size_t il, size_t token) const;
    // Physical row of token t (t among the tokens of the last append, or still stored).
    size_t row_of(size_t il, size_t token) const;
    // Physical rows a query at token t may see; rows inside must still be masked by positions.
    // With `last` (>= token, stored in the same step): the query also sees tokens (token, last]
    // (a bidirectional span, e.g. a Gemma 3 image).
    RowRange rows_for_query(size_t il, size_t token) const { return rows_for_query(il, token, token); }
    RowRange rows_for_query(size_t il, size_t token, size_t last) const;
    // The mask for a query at token t of layer il (seeing up to token `last`).
    AttentionMask mask_for(size_t il, size_t token) const { return mask_for(il, token, token); }
    AttentionMask mask_for(size_t il, size_t token, size_t last) const;

    // Stores one token's key and value rows (k: [k_width], v: [v_width] floats).
    void write_row(size_t il, size_t row, const float* k, const float* v);
    // Dequantized key/value row (tests, compaction).
    void read_row(size_t il, size_t row, float* k, float* v) const;

    // What a backend sees of token t in layer il (row, visible rows, positions, mask), the query
    // seeing up to token `last` (>= token; token itself = causal).
    KvView view(size_t il, size_t token, size_t last) const;

    KvStorage& storage() { return *storage_; }
    const KvStorage& storage() const { return *storage_; }
    // [capacity(il)] position held by each physical row of layer il, -1 = empty.
    const int32_t* row_positions(size_t il) const { return layers_[il].row_pos.data(); }

    size_t bytes() const;

private:
    struct Layer {
        KvLayerSpec spec;
        bool ring = false;
        size_t capacity = 0;  // physical rows
        size_t used = 0;      // rows [0, used) have ever been written (ring) / hold rows (global)
        size_t oldest = 0;    // ring: tokens [oldest, n_past) (and the sinks) are all still stored
        size_t head_dim_k = 0;
        size_t head_dim_v = 0;
        std::vector<int32_t> row_pos;  // [capacity], -1 = empty
    };

    void init_layer(Layer& layer, const KvLayerSpec& spec) const;
    size_t ring_row(const Layer& layer, size_t token) const;
    bool ring_can_truncate(const Layer& layer, size_t n) const;
    size_t global_rows() const { return n_tokens_ - global_offset_; }
    void compact_all();
    void compact_layer(size_t il);

    KvCacheConfig config_;
    std::vector<Layer> layers_;
    bool has_global_ = false;
    size_t ring_chunk_ = 0;  // largest append the rings were sized for (0 = no ring)
    size_t n_tokens_ = 0;
    size_t global_offset_ = 0;   // tokens dropped from global layers by compaction
    size_t truncate_floor_ = 0;  // n_tokens at the last compaction
    size_t compactions_ = 0;
    std::unique_ptr<KvStorage> storage_;  // the rows (backend memory)
};

// Which cache and token each row of a step belongs to: row i is token `token[i]` (its index in its
// sequence) of `cache[i]`. The models keep a step's tokens this way and hand each layer's
// backend ops the views of kv_batch.
struct KvTokens {
    size_t n = 0;
    KvCache* const* cache = nullptr;  // [n]
    const size_t* token = nullptr;    // [n]
    // [n] the last token each query sees (>= token[i], stored by this step: a bidirectional span
    // such as a Gemma 3 image sees all of itself); nullptr = causal (token[i] itself).
    const size_t* last = nullptr;
};

// The views of layer il for the step's tokens, written into `views` (resized to n).
KvBatch kv_batch(const KvTokens& tokens, size_t il, std::vector<KvView>& views);

// The storage layout of a layer with `capacity` physical rows.
KvLayerLayout layout_of(const KvLayerSpec& spec, size_t capacity);

// Quantizes n floats into int8 groups of kKvGroup (the last group may be shorter):
// scale = max|x| / 127, q = round(x / scale). scales: [ceil(n / kKvGroup)].
void kv_quantize_i8(int8_t* q, float* scales, const float* x, size_t n);
void kv_dequantize_i8(float* x, const int8_t* q, const float* scales, size_t n);

}  // namespace cactus
