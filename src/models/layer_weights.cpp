#include "models/layer_weights.h"

#include "models/weights.h"

namespace cactus {

AttentionWeights load_attention_weights(WeightLoader& w, size_t il, const LayerSpec& spec, size_t n_embd) {
    const AttentionSpec& a = spec.attn;
    AttentionWeights l;
    l.norm = w.vector(layer_tensor(il, "attn_norm.weight"), n_embd);
    l.wq = w.matrix(layer_tensor(il, "attn_q.weight"), n_embd, a.q_width());
    if (a.qkv_bias) l.bq = w.vector(layer_tensor(il, "attn_q.bias"), a.q_width());
    if (a.stores_kv()) {
        l.wk = w.matrix(layer_tensor(il, "attn_k.weight"), n_embd, a.k_width());
        if (!a.v_from_k) l.wv = w.matrix(layer_tensor(il, "attn_v.weight"), n_embd, a.v_width());
        if (a.qkv_bias) {
            l.bk = w.vector(layer_tensor(il, "attn_k.bias"), a.k_width());
            l.bv = w.vector(layer_tensor(il, "attn_v.bias"), a.v_width());
        }
    }
    if (a.qk_norm) {
        l.q_norm = w.vector(layer_tensor(il, "attn_q_norm.weight"), a.head_dim_k);
        if (a.stores_kv()) l.k_norm = w.vector(layer_tensor(il, "attn_k_norm.weight"), a.head_dim_k);
    }
    l.wo = w.matrix(layer_tensor(il, "attn_output.weight"), a.out_width(), n_embd);
    if (spec.post_norms) l.post_norm = w.vector(layer_tensor(il, "post_attention_norm.weight"), n_embd);
    return l;
}

FfnWeights load_ffn_weights(WeightLoader& w, size_t il, const LayerSpec& spec, size_t n_embd) {
    const size_t n_ff = spec.ffn.n_ff;
    FfnWeights l;
    l.norm = w.vector(layer_tensor(il, "ffn_norm.weight"), n_embd);
    l.gate = w.matrix(layer_tensor(il, "ffn_gate.weight"), n_embd, n_ff);
    l.up = w.matrix(layer_tensor(il, "ffn_up.weight"), n_embd, n_ff);
    l.down = w.matrix(layer_tensor(il, "ffn_down.weight"), n_ff, n_embd);
    if (spec.post_norms) l.post_norm = w.vector(layer_tensor(il, "post_ffw_norm.weight"), n_embd);
    return l;
}

}  // namespace cactus
