#pragma once
// What one decoder layer is, as data: an architecture turns its GGUF hyper-parameters into one
// LayerSpec per layer, and one attention block and one feed-forward block (src/models/decoder.h)
// serve every family. Families differ in their specs (head sizes, FFN width, which layer's KV a
// layer reads, RoPE, window, norms), not in copies of the blocks.
#include <cstddef>
#include <cstdint>

#include "backends/backend.h"
#include "ops/ops_ref.h"

namespace cactus {

// The token mixer of a layer: attention over the KV cache, or LFM2's short convolution (whose
// state the LFM2 file keeps; the decoder only knows that such a layer has no KV rows).
enum class Mixer { ATTENTION, SHORT_CONV };

struct AttentionSpec {
    size_t n_head = 0;
    size_t n_head_kv = 0;
    size_t head_dim_k = 0;
    size_t head_dim_v = 0;
    float scale = 1.0f;     // multiplies q.k: 1/sqrt(head_dim_k) in most families, 1 in Gemma 4
    RopeParams rope;        // of q and k; n_rot 0 = no RoPE
    uint32_t window = 0;    // sliding window in tokens; 0 = global
    bool qkv_bias = false;  // attn_{q,k,v}.bias
    bool qk_norm = false;   // per-head RMSNorm of q and k, weights [head_dim_k] (attn_{q,k}_norm)
    bool v_norm = false;    // per-head RMSNorm of v without a weight (Gemma 4)
    bool v_from_k = false;  // no attn_v: v is the key projection before its norm (Gemma 4 31B's K=V)
    // KV sharing (Gemma 4's last layers): the layer reads the keys and values that layer kv_source
    // (an earlier one, with the same layout) wrote in the same step, and has no key or value
    // projection of its own. kNoSource: the layer stores its own.
    static constexpr size_t kNoSource = SIZE_MAX;
    size_t kv_source = kNoSource;

    bool stores_kv() const { return kv_source == kNoSource; }
    size_t q_width() const { return n_head * head_dim_k; }
    size_t k_width() const { return n_head_kv * head_dim_k; }
    size_t v_width() const { return n_head_kv * head_dim_v; }
    size_t out_width() const { return n_head * head_dim_v; }
};

struct FfnSpec {
    size_t n_ff = 0;
    Activation act = Activation::SILU;  // of the gate: SwiGLU (SILU) or GeGLU (GELU_TANH)
};

struct LayerSpec {
    Mixer mixer = Mixer::ATTENTION;
    AttentionSpec attn;  // mixer == ATTENTION
    FfnSpec ffn;
    // Gemma: RMSNorm of each block's output before it joins the residual stream
    // (post_attention_norm, post_ffw_norm).
    bool post_norms = false;
};

}  // namespace cactus
