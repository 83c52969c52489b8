#pragma once
// Memory a model will take beyond its (mapped) weights, predicted before anything is allocated,
// and the checks that turn a hostile or careless size into an error with the figures instead of
// a bad_alloc or the OOM killer. Independent of any architecture: callers pass plain sizes (the
// decoder (src/models/decoder.cpp), the engine when it resizes a context).
//
// Order of a model load (docs/ARCHITECTURE.md, "Invariants": hostile input):
//   1. hyper-parameters read and checked for consistency (no allocation sized by them);
//   2. check_layer_count: every layer must have tensors in the file;
//   3. every weight's shape checked against the hyper-parameters (the weights are in the file, so
//      dims that pass are backed by bytes that exist);
//   4. plan_model_memory + check_memory_budget: n_ctx against the trained context, KV + activations
//      against the budget;
//   5. only then the KV cache and the activations are allocated.
#include <cstddef>

namespace cactus {

class GgufFile;

// Widths of the per-token activation buffers of a decoder (elements per token).
struct ActivationDims {
    size_t n_batch = 0;       // tokens per forward chunk
    size_t n_embd = 0;        // residual stream (x, cur, tmp: three buffers)
    size_t q_width = 0;       // n_head * head_dim_k
    size_t k_width = 0;       // n_head_kv * head_dim_k
    size_t v_width = 0;       // n_head_kv * head_dim_v
    size_t attn_width = 0;    // n_head * head_dim_v
    size_t n_ff = 0;          // gate and up: two buffers
    size_t n_vocab = 0;       // one row of logits
    size_t n_threads = 1;     // attention scratch per thread
    size_t scratch_rows = 0;  // KV rows one attention scratch covers (the largest layer capacity)
    size_t head_group = 1;    // query heads per KV head
};

struct ModelMemoryPlan {
    size_t kv_bytes = 0;          // KvCache::predict_bytes
    size_t activation_bytes = 0;  // predict_activation_bytes
    size_t total() const { return kv_bytes + activation_bytes; }
};

// Bytes of the activation buffers and scratch for these widths; saturates at SIZE_MAX.
size_t predict_activation_bytes(const ActivationDims& dims);

// Bytes of physical memory of this machine (0 when unknown).
size_t physical_memory_bytes();

// Fails (cactus::Error with every figure) when n_ctx exceeds n_ctx_train, or when the plan exceeds
// budget_bytes (0: the machine's physical memory).
void check_memory_budget(const ModelMemoryPlan& plan, size_t n_ctx, size_t n_ctx_train, size_t budget_bytes);

// Fails when the file cannot hold n_layer layers: each needs at least one tensor.
void check_layer_count(const GgufFile& file, size_t n_layer);

}  // namespace cactus
