#pragma once
// Where a KV cache's rows live. KvCache (kv_cache.h) keeps the bookkeeping on the host (which token
// is in which physical row, positions, rings, compaction decisions); a KvStorage made by the
// backend holds the rows themselves (host memory for the CPU backend, device memory for a GPU) and
// does the few row operations the bookkeeping needs: store a row, read / write / move one head.
//
// Layout of a layer (every precision): [capacity, k_width] keys and [capacity, v_width] values,
// heads side by side in a row, of 2 (f16), 1 (int8) or 4 (f32) bytes per element. int8 rows carry
// one f32 scale per group of kKvGroup elements of a head (the last group of a head may be shorter):
// [capacity, n_head_kv * groups_per_head]. f32 rows hold the floats they were given, so reading,
// writing and moving a head are exact.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_options.h"

namespace cactus {

struct KvLayerLayout {
    size_t k_width = 0;  // n_head_kv * head_dim_k
    size_t v_width = 0;  // n_head_kv * head_dim_v
    size_t n_head_kv = 1;
    size_t capacity = 0;  // physical rows
};

class KvStorage {
public:
    virtual ~KvStorage() = default;
    virtual KvType type() const = 0;
    // One token's key [k_width] and value [v_width] floats into row `row` of layer il.
    virtual void write_row(size_t il, size_t row, const float* k, const float* v) = 0;
    // One head of a row, dequantized (key: head_dim_k floats, else head_dim_v), and back.
    virtual void read_head(size_t il, size_t row, size_t head, bool key, float* out) const = 0;
    virtual void write_head(size_t il, size_t row, size_t head, bool key, const float* in) = 0;
    // Copies head `head` of row src (key, value and scales) to row dst.
    virtual void move_head(size_t il, size_t dst, size_t src, size_t head) = 0;
    // Bytes of row storage (keys, values, scales).
    virtual size_t bytes() const = 0;
};

size_t kv_groups_of(size_t n);  // int8 scale groups of n elements

// Bytes of row storage a layer of this layout takes in this precision (keys, values, scales): the
// same in every backend's storage.
size_t kv_storage_bytes(const KvLayerLayout& layer, KvType type);

}  // namespace cactus
