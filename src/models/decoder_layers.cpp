// The shared blocks of DecoderModel: one attention block and one feed-forward block, driven by
// each layer's LayerSpec, for every architecture.
#include "models/decoder.h"

namespace cactus {

namespace {

// The first rows of an activation buffer seen as [rows, width] for a layer narrower than the
// widest one (the buffers are contiguous, so the view is too).
Tensor narrowed(const Tensor& t, size_t width) { return make_tensor(t.buffer, t.offset, t.type, width, t.rows()); }

}  // namespace

Tensor DecoderModel::attention_block(const Step& step, size_t il, const Activations& a) {
    const AttentionSpec& s = layers_[il].attn;
    const AttentionWeights& w = attention_[il];
    const float eps = hp_.rms_eps;
    const Tensor q = narrowed(a.q, s.q_width());         // [n, n_head * head_dim_k]
    const Tensor out = narrowed(a.attn, s.out_width());  // [n, n_head * head_dim_v]
    const Tensor& pos = positions(step, il);
    if (s.stores_kv()) {
        const Tensor k = narrowed(a.k, s.k_width());  // [n, n_head_kv * head_dim_k]
        const Tensor v = narrowed(a.v, s.v_width());  // [n, n_head_kv * head_dim_v]
        if (s.v_from_k) {
            nn_.linears(a.cur, {{q, w.wq, w.bq}, {k, w.wk, w.bk}});
            backend_->scale(v, k, 1.0f);  // the raw key projection (K = V), before the key norm
        } else {
            nn_.linears(a.cur, {{q, w.wq, w.bq}, {k, w.wk, w.bk}, {v, w.wv, w.bv}});
        }
        if (s.qk_norm) {
            nn_.head_norm(q, s.n_head, w.q_norm, eps);  // per head, [head_dim_k] weight
            nn_.head_norm(k, s.n_head_kv, w.k_norm, eps);
        }
        if (s.v_norm) nn_.head_norm(v, s.n_head_kv, Tensor(), eps);
        if (s.rope.n_rot > 0) {
            nn_.rope(q, s.n_head, pos, s.rope);
            nn_.rope(k, s.n_head_kv, pos, s.rope);
        }
        nn_.attention(out, kv_batch(step.kv, kv_layer_[il], kv_views_), q, k, v, s.n_head, s.scale);
    } else {
        // KV sharing: the source layer stored this step's rows already.
        nn_.linear(q, w.wq, a.cur, w.bq);
        if (s.qk_norm) nn_.head_norm(q, s.n_head, w.q_norm, eps);
        if (s.rope.n_rot > 0) nn_.rope(q, s.n_head, pos, s.rope);
        nn_.attend(out, kv_batch(step.kv, kv_layer_[il], kv_views_), q, s.n_head, s.scale);
    }
    return out;
}

bool DecoderModel::folds_residual(const Tensor& post_norm) const { return post_norm.empty() && !recording(); }

void DecoderModel::attention_sublayer(const Step& step, size_t il) {
    const Activations a = act(step.n);
    const AttentionWeights& w = attention_[il];
    nn_.rms_norm(a.cur, a.x, w.norm, hp_.rms_eps);    // [n, n_embd]
    const Tensor out = attention_block(step, il, a);  // [n, n_head * head_dim_v]
    if (folds_residual(w.post_norm)) {
        nn_.linear_residual(a.x, w.wo, out, a.tmp);
        return;
    }
    nn_.linear(a.tmp, w.wo, out);  // [n, n_embd]
    if (!w.post_norm.empty()) nn_.rms_norm(a.tmp, a.tmp, w.post_norm, hp_.rms_eps);
    tap("attn_out", static_cast<int>(il), a.tmp);
    nn_.residual(a.x, a.tmp);
}

void DecoderModel::ffn_sublayer(const Step& step, size_t il) {
    const Activations a = act(step.n);
    const FfnSpec& s = layers_[il].ffn;
    const FfnWeights& w = ffn_[il];
    nn_.rms_norm(a.cur, a.x, w.norm, hp_.rms_eps);
    const Tensor gate = narrowed(a.gate, s.n_ff), up = narrowed(a.up, s.n_ff);  // [n, n_ff]
    if (folds_residual(w.post_norm)) {
        nn_.ffn_residual(a.x, a.cur, w.gate, w.up, w.down, s.act, gate, up, a.tmp);
        return;
    }
    nn_.ffn(a.tmp, a.cur, w.gate, w.up, w.down, s.act, gate, up);
    if (!w.post_norm.empty()) nn_.rms_norm(a.tmp, a.tmp, w.post_norm, hp_.rms_eps);
    tap("ffn_out", static_cast<int>(il), a.tmp);
    nn_.residual(a.x, a.tmp);
}

}  // namespace cactus
