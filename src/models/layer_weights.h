#pragma once
// The weights of the shared decoder blocks, under the GGUF names llama.cpp's converter writes
// ("blk.<il>.attn_q.weight", ...). Which tensors a layer has follows from its LayerSpec; an empty
// Tensor is one the layer does not have.
#include <cstddef>

#include "core/tensor.h"
#include "models/layer_spec.h"

namespace cactus {

class WeightLoader;

struct AttentionWeights {
    Tensor norm;       // [n_embd] attn_norm
    Tensor wq;         // [n_head * head_dim_k, n_embd]
    Tensor bq;         // [n_head * head_dim_k] (qkv_bias)
    Tensor wk;         // [n_head_kv * head_dim_k, n_embd] (stores_kv())
    Tensor bk;         // [n_head_kv * head_dim_k]
    Tensor wv;         // [n_head_kv * head_dim_v, n_embd] (stores_kv(), not v_from_k)
    Tensor bv;         // [n_head_kv * head_dim_v]
    Tensor q_norm;     // [head_dim_k] (qk_norm)
    Tensor k_norm;     // [head_dim_k] (qk_norm, stores_kv())
    Tensor wo;         // [n_embd, n_head * head_dim_v]
    Tensor post_norm;  // [n_embd] post_attention_norm (post_norms)
};

struct FfnWeights {
    Tensor norm;       // [n_embd] ffn_norm
    Tensor gate;       // [n_ff, n_embd]
    Tensor up;         // [n_ff, n_embd]
    Tensor down;       // [n_embd, n_ff]
    Tensor post_norm;  // [n_embd] post_ffw_norm (post_norms)
};

// Layer il's attention weights as its spec describes them (the block's input norm included).
AttentionWeights load_attention_weights(WeightLoader& w, size_t il, const LayerSpec& spec, size_t n_embd);
// Layer il's feed-forward weights (its input norm included).
FfnWeights load_ffn_weights(WeightLoader& w, size_t il, const LayerSpec& spec, size_t n_embd);

}  // namespace cactus
