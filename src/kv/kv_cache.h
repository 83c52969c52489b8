#pragma once
// The KV cache of a decoder: per layer, keys (after RoPE) and values stored as IEEE half rows.
//
// Logical positions (the token's index in the sequence) are kept apart from physical rows: every
// layer has a `row_pos` array giving the position held by each physical row (-1 = empty), and
// attention masks by those positions, never by row index. Today every layer uses the full layout
// (row == position, capacity n_ctx); sliding-window layers keep all rows and attention masks them
// by window. Sliding rings with sink rows, int8 rows and compaction change only this class:
// row_of() and rows_for_queries() are the only places that know the layout.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cactus {

struct KvLayerSpec {
    size_t k_width = 0;   // n_head_kv * head_dim_k halves per key row
    size_t v_width = 0;   // n_head_kv * head_dim_v halves per value row
    uint32_t window = 0;  // sliding window in tokens; 0 = global attention
};

// Half-open range of physical rows.
struct RowRange {
    size_t begin = 0;
    size_t end = 0;
};

class KvCache {
public:
    // Throws cactus::Error when n_ctx is 0 or the cache would not fit in memory.
    KvCache(std::vector<KvLayerSpec> layers, size_t n_ctx);

    size_t n_layer() const { return layers_.size(); }
    size_t capacity() const { return n_ctx_; }  // tokens
    size_t n_past() const { return n_past_; }
    const KvLayerSpec& spec(size_t il) const { return layers_[il].spec; }

    // Claims positions [n_past, n_past + n) in every layer and returns n_past before the call.
    // Throws cactus::Error when the cache would overflow. The caller then writes the rows.
    size_t append(size_t n);
    // Drops positions >= n (n <= n_past).
    void truncate(size_t n);

    // Physical row that holds logical position pos in layer il (pos < n_past).
    size_t row_of(size_t il, size_t pos) const;
    // Rows that may be visible to queries at positions [pos_lo, pos_hi]; rows in the range must
    // still be masked by row_positions() (attention_row_visible).
    RowRange rows_for_queries(size_t il, size_t pos_lo, size_t pos_hi) const;

    uint16_t* k_row(size_t il, size_t row) { return layers_[il].k.data() + row * layers_[il].spec.k_width; }
    uint16_t* v_row(size_t il, size_t row) { return layers_[il].v.data() + row * layers_[il].spec.v_width; }
    const uint16_t* k_row(size_t il, size_t row) const {
        return layers_[il].k.data() + row * layers_[il].spec.k_width;
    }
    const uint16_t* v_row(size_t il, size_t row) const {
        return layers_[il].v.data() + row * layers_[il].spec.v_width;
    }
    const int32_t* row_positions(size_t il) const { return layers_[il].row_pos.data(); }

    size_t bytes() const;

private:
    struct Layer {
        KvLayerSpec spec;
        std::vector<uint16_t> k;        // [n_ctx, k_width]
        std::vector<uint16_t> v;        // [n_ctx, v_width]
        std::vector<int32_t> row_pos;   // [n_ctx], -1 = empty
    };
    std::vector<Layer> layers_;
    size_t n_ctx_ = 0;
    size_t n_past_ = 0;
};

}  // namespace cactus
