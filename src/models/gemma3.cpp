// Gemma 3 (text): embeddings scaled by sqrt(n_embd); RMSNorm before and after both attention and
// feed-forward (the GGUF converter already stores the norm weights as 1 + w); per-head RMSNorm of
// queries and keys; NEOX-style RoPE; queries scaled by 1/sqrt(key_length); GeGLU (tanh GELU).
// Layers alternate five sliding-window layers (window attention.sliding_window, RoPE base 10000)
// with one global layer (RoPE base rope.freq_base): layer il is global when (il + 1) % 6 == 0.
#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "models/layers.h"

namespace cactus {

namespace {

constexpr size_t kSlidingPattern = 6;
constexpr float kSlidingRopeBase = 10000.0f;

struct Gemma3Layer {
    std::vector<float> attn_norm;       // [n_embd]
    Matrix wq;                          // [n_head * head_dim, n_embd]
    Matrix wk;                          // [n_head_kv * head_dim, n_embd]
    Matrix wv;                          // [n_head_kv * head_dim_v, n_embd]
    std::vector<float> q_norm;          // [head_dim]
    std::vector<float> k_norm;          // [head_dim]
    Matrix wo;                          // [n_embd, n_head * head_dim_v]
    std::vector<float> post_attn_norm;  // [n_embd]
    std::vector<float> ffn_norm;        // [n_embd]
    Matrix ffn_gate;                    // [n_ff, n_embd]
    Matrix ffn_up;                      // [n_ff, n_embd]
    Matrix ffn_down;                    // [n_embd, n_ff]
    std::vector<float> post_ffn_norm;   // [n_embd]
    bool sliding = false;
};

class Gemma3Model : public DecoderModel {
public:
    Gemma3Model(const GgufFile& file, const ModelOptions& options, const HParams& hp)
        : DecoderModel(file, options, hp) {
        if (hp.sliding_window == 0) fail("load gemma3: gemma3.attention.sliding_window is missing or 0");
        load_layers(file);
        const size_t e = hp.n_embd;
        const char* output_name = file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
        set_output(require_matrix(file, output_name, e, hp.n_vocab),
                   require_vector(file, "output_norm.weight", e));
        rope_global_ = {RopeStyle::NEOX, hp.n_rot, hp.rope_base, hp.rope_freq_scale};
        rope_local_ = {RopeStyle::NEOX, hp.n_rot, kSlidingRopeBase, 1.0f};
        // Sliding layers become rings without sink rows: the trained model's local layers see
        // exactly the window, and so do ours (docs/LONG_CONTEXT.md).
        std::vector<KvLayerSpec> specs;
        for (const Gemma3Layer& l : layers_) {
            KvLayerSpec spec;
            spec.k_width = hp.n_head_kv * hp.head_dim_k;
            spec.v_width = hp.n_head_kv * hp.head_dim_v;
            spec.window = l.sliding ? hp.sliding_window : 0u;
            spec.n_head_kv = hp.n_head_kv;
            spec.rope = l.sliding ? rope_local_ : rope_global_;
            specs.push_back(spec);
        }
        init_cache(specs);
    }

protected:
    float embedding_scale() const override { return std::sqrt(static_cast<float>(hp_.n_embd)); }

    void forward_layers(const Batch& batch) override {
        const size_t n = batch.n;
        const size_t e = hp_.n_embd;
        const size_t dk = hp_.head_dim_k;
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        for (size_t il = 0; il < layers_.size(); ++il) {
            const Gemma3Layer& l = layers_[il];
            build_norm(cur_.data(), x_.data(), l.attn_norm, n, e);  // [n, n_embd]
            build_matmul(q_.data(), l.wq, cur_.data(), n);         // [n, n_head, head_dim]
            build_matmul(k_.data(), l.wk, cur_.data(), n);         // [n, n_head_kv, head_dim]
            build_matmul(v_.data(), l.wv, cur_.data(), n);         // [n, n_head_kv, head_dim_v]
            build_norm(q_.data(), q_.data(), l.q_norm, n * hp_.n_head, dk);
            build_norm(k_.data(), k_.data(), l.k_norm, n * hp_.n_head_kv, dk);
            build_rope(il, batch, l.sliding ? rope_local_ : rope_global_);
            store_kv(il, batch);
            build_attention(il, batch, scale);                     // attn_ [n, n_head * head_dim_v]
            build_matmul(tmp_.data(), l.wo, attn_.data(), n);      // [n, n_embd]
            build_norm(tmp_.data(), tmp_.data(), l.post_attn_norm, n, e);
            add_residual(x_.data(), tmp_.data(), n, e);

            build_norm(cur_.data(), x_.data(), l.ffn_norm, n, e);
            build_ffn(tmp_.data(), cur_.data(), n, l.ffn_gate, l.ffn_up, l.ffn_down, Activation::GELU_TANH);
            build_norm(tmp_.data(), tmp_.data(), l.post_ffn_norm, n, e);
            add_residual(x_.data(), tmp_.data(), n, e);
        }
    }

private:
    void load_layers(const GgufFile& file) {
        const HParams& hp = hp_;
        const size_t e = hp.n_embd;
        const size_t dk = hp.head_dim_k;
        layers_.resize(hp.n_layer);
        for (size_t il = 0; il < hp.n_layer; ++il) {
            Gemma3Layer& l = layers_[il];
            l.attn_norm = require_vector(file, layer_tensor(il, "attn_norm.weight"), e);
            l.wq = require_matrix(file, layer_tensor(il, "attn_q.weight"), e, hp.n_head * dk);
            l.wk = require_matrix(file, layer_tensor(il, "attn_k.weight"), e, hp.n_head_kv * dk);
            l.wv = require_matrix(file, layer_tensor(il, "attn_v.weight"), e, hp.n_head_kv * hp.head_dim_v);
            l.q_norm = require_vector(file, layer_tensor(il, "attn_q_norm.weight"), dk);
            l.k_norm = require_vector(file, layer_tensor(il, "attn_k_norm.weight"), dk);
            l.wo = require_matrix(file, layer_tensor(il, "attn_output.weight"), hp.n_head * hp.head_dim_v, e);
            l.post_attn_norm = require_vector(file, layer_tensor(il, "post_attention_norm.weight"), e);
            l.ffn_norm = require_vector(file, layer_tensor(il, "ffn_norm.weight"), e);
            l.ffn_gate = require_matrix(file, layer_tensor(il, "ffn_gate.weight"), e, hp.n_ff);
            l.ffn_up = require_matrix(file, layer_tensor(il, "ffn_up.weight"), e, hp.n_ff);
            l.ffn_down = require_matrix(file, layer_tensor(il, "ffn_down.weight"), hp.n_ff, e);
            l.post_ffn_norm = require_vector(file, layer_tensor(il, "post_ffw_norm.weight"), e);
            l.sliding = (il + 1) % kSlidingPattern != 0;
        }
    }

    std::vector<Gemma3Layer> layers_;
    RopeParams rope_global_;
    RopeParams rope_local_;
};

}  // namespace

std::unique_ptr<Model> load_gemma3(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<Gemma3Model>(file, options, read_hparams(file, "gemma3"));
}

}  // namespace cactus
