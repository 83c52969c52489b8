// Llama (and SmolLM, Mistral-style dense models): pre-norm blocks with RMSNorm, RoPE in the
// normal (interleaved-pair) style, grouped-query attention, SwiGLU feed-forward.
#include <cmath>

#include "gguf/gguf.h"
#include "models/layers.h"

namespace cactus {

namespace {

struct LlamaLayer {
    std::vector<float> attn_norm;  // [n_embd]
    Matrix wq;                     // [n_head * head_dim, n_embd]
    Matrix wk;                     // [n_head_kv * head_dim, n_embd]
    Matrix wv;                     // [n_head_kv * head_dim_v, n_embd]
    Matrix wo;                     // [n_embd, n_head * head_dim_v]
    std::vector<float> ffn_norm;   // [n_embd]
    Matrix ffn_gate;               // [n_ff, n_embd]
    Matrix ffn_up;                 // [n_ff, n_embd]
    Matrix ffn_down;               // [n_embd, n_ff]
};

class LlamaModel : public DecoderModel {
public:
    LlamaModel(const GgufFile& file, const ModelOptions& options, const HParams& hp)
        : DecoderModel(file, options, hp) {
        const size_t e = hp.n_embd;
        const size_t q_width = hp.n_head * hp.head_dim_k;
        const size_t k_width = hp.n_head_kv * hp.head_dim_k;
        const size_t v_width = hp.n_head_kv * hp.head_dim_v;
        const size_t o_width = hp.n_head * hp.head_dim_v;
        layers_.resize(hp.n_layer);
        for (size_t il = 0; il < hp.n_layer; ++il) {
            LlamaLayer& l = layers_[il];
            l.attn_norm = require_vector(file, layer_tensor(il, "attn_norm.weight"), e);
            l.wq = require_matrix(file, layer_tensor(il, "attn_q.weight"), e, q_width);
            l.wk = require_matrix(file, layer_tensor(il, "attn_k.weight"), e, k_width);
            l.wv = require_matrix(file, layer_tensor(il, "attn_v.weight"), e, v_width);
            l.wo = require_matrix(file, layer_tensor(il, "attn_output.weight"), o_width, e);
            l.ffn_norm = require_vector(file, layer_tensor(il, "ffn_norm.weight"), e);
            l.ffn_gate = require_matrix(file, layer_tensor(il, "ffn_gate.weight"), e, hp.n_ff);
            l.ffn_up = require_matrix(file, layer_tensor(il, "ffn_up.weight"), e, hp.n_ff);
            l.ffn_down = require_matrix(file, layer_tensor(il, "ffn_down.weight"), hp.n_ff, e);
        }
        // Tied embeddings: without output.weight the token embedding matrix is the output head.
        const char* output_name = file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
        set_output(require_matrix(file, output_name, e, hp.n_vocab),
                   require_vector(file, "output_norm.weight", e));
        rope_.style = RopeStyle::NORMAL;
        rope_.n_rot = hp.n_rot;
        rope_.freq_base = hp.rope_base;
        rope_.freq_scale = hp.rope_freq_scale;
        KvLayerSpec spec;
        spec.k_width = k_width;
        spec.v_width = v_width;
        spec.n_head_kv = hp.n_head_kv;
        spec.rope = rope_;
        init_cache(std::vector<KvLayerSpec>(hp.n_layer, spec));
    }

protected:
    void forward_layers(const Batch& batch) override {
        const size_t n = batch.n;
        const size_t e = hp_.n_embd;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));
        for (size_t il = 0; il < layers_.size(); ++il) {
            const LlamaLayer& l = layers_[il];
            build_norm(cur_.data(), x_.data(), l.attn_norm, n, e);  // [n, n_embd]
            build_matmul(q_.data(), l.wq, cur_.data(), n);         // [n, n_head * head_dim]
            build_matmul(k_.data(), l.wk, cur_.data(), n);         // [n, n_head_kv * head_dim]
            build_matmul(v_.data(), l.wv, cur_.data(), n);         // [n, n_head_kv * head_dim_v]
            build_rope(il, batch, rope_);
            store_kv(il, batch);
            build_attention(il, batch, scale);                     // attn_ [n, n_head * head_dim_v]
            build_matmul(tmp_.data(), l.wo, attn_.data(), n);      // [n, n_embd]
            add_residual(x_.data(), tmp_.data(), n, e);

            build_norm(cur_.data(), x_.data(), l.ffn_norm, n, e);
            build_ffn(tmp_.data(), cur_.data(), n, l.ffn_gate, l.ffn_up, l.ffn_down, Activation::SILU);
            add_residual(x_.data(), tmp_.data(), n, e);
        }
    }

private:
    std::vector<LlamaLayer> layers_;
    RopeParams rope_;
};

}  // namespace

std::unique_ptr<Model> load_llama(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<LlamaModel>(file, options, read_hparams(file, "llama"));
}

}  // namespace cactus
