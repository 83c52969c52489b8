// Gemma 3 (text): embeddings scaled by sqrt(n_embd); RMSNorm before and after both attention and
// feed-forward (the GGUF converter already stores the norm weights as 1 + w); per-head RMSNorm of
// queries and keys; NEOX-style RoPE; queries scaled by 1/sqrt(key_length); GeGLU (tanh GELU).
// Layers alternate five sliding-window layers (window attention.sliding_window, RoPE base 10000)
// with one global layer (RoPE base rope.freq_base): layer il is global when (il + 1) % 6 == 0.
#include <cmath>

#include "core/error.h"
#include "models/decoder.h"

namespace cactus {

namespace {

constexpr size_t kSlidingPattern = 6;
constexpr float kSlidingRopeBase = 10000.0f;

struct Gemma3Layer {
    Tensor attn_norm;       // [n_embd]
    Tensor wq;              // [n_head * head_dim, n_embd]
    Tensor wk;              // [n_head_kv * head_dim, n_embd]
    Tensor wv;              // [n_head_kv * head_dim_v, n_embd]
    Tensor q_norm;          // [head_dim]
    Tensor k_norm;          // [head_dim]
    Tensor wo;              // [n_embd, n_head * head_dim_v]
    Tensor post_attn_norm;  // [n_embd]
    Tensor ffn_norm;        // [n_embd]
    Tensor ffn_gate;        // [n_ff, n_embd]
    Tensor ffn_up;          // [n_ff, n_embd]
    Tensor ffn_down;        // [n_embd, n_ff]
    Tensor post_ffn_norm;   // [n_embd]
    bool sliding = false;
};

class Gemma3Model : public DecoderModel {
public:
    Gemma3Model(const GgufFile& file, const ModelOptions& options, const HParams& hp)
        : DecoderModel(file, options, hp) {
        if (hp.sliding_window == 0) fail("load gemma3: gemma3.attention.sliding_window is missing or 0");
        load_layers();
        const size_t e = hp.n_embd;
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
        WeightLoader& w = weights();
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(specs, w.matrix(output_name, e, hp.n_vocab), w.vector("output_norm.weight", e));
    }

protected:
    float embedding_scale() const override { return std::sqrt(static_cast<float>(hp_.n_embd)); }

    void forward_layers(const Step& step) override {
        const Activations a = act(step.n);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));
        const float eps = hp_.rms_eps;
        for (size_t il = 0; il < layers_.size(); ++il) {
            const Gemma3Layer& l = layers_[il];
            const RopeParams& rope = l.sliding ? rope_local_ : rope_global_;
            nn().rms_norm(a.cur, a.x, l.attn_norm, eps);  // [n, n_embd]
            // q [n, n_head, head_dim], k [n, n_head_kv, head_dim], v [n, n_head_kv, head_dim_v]
            nn().linears(a.cur, {{a.q, l.wq}, {a.k, l.wk}, {a.v, l.wv}});
            nn().head_norm(a.q, hp_.n_head, l.q_norm, eps);
            nn().head_norm(a.k, hp_.n_head_kv, l.k_norm, eps);
            nn().rope(a.q, hp_.n_head, positions(step, il), rope);
            nn().rope(a.k, hp_.n_head_kv, positions(step, il), rope);
            nn().attention(a.attn, il, step.kv, a.q, a.k, a.v, hp_.n_head, scale);  // [n, n_head * head_dim_v]
            nn().linear(a.tmp, l.wo, a.attn);                                       // [n, n_embd]
            nn().rms_norm(a.tmp, a.tmp, l.post_attn_norm, eps);
            nn().residual(a.x, a.tmp);

            nn().rms_norm(a.cur, a.x, l.ffn_norm, eps);
            nn().ffn(a.tmp, a.cur, l.ffn_gate, l.ffn_up, l.ffn_down, Activation::GELU_TANH, a.gate, a.up);
            nn().rms_norm(a.tmp, a.tmp, l.post_ffn_norm, eps);
            nn().residual(a.x, a.tmp);
        }
    }

private:
    void load_layers() {
        const HParams& hp = hp_;
        const size_t e = hp.n_embd;
        const size_t dk = hp.head_dim_k;
        WeightLoader& w = weights();
        layers_.resize(hp.n_layer);
        for (size_t il = 0; il < hp.n_layer; ++il) {
            Gemma3Layer& l = layers_[il];
            l.attn_norm = w.vector(layer_tensor(il, "attn_norm.weight"), e);
            l.wq = w.matrix(layer_tensor(il, "attn_q.weight"), e, hp.n_head * dk);
            l.wk = w.matrix(layer_tensor(il, "attn_k.weight"), e, hp.n_head_kv * dk);
            l.wv = w.matrix(layer_tensor(il, "attn_v.weight"), e, hp.n_head_kv * hp.head_dim_v);
            l.q_norm = w.vector(layer_tensor(il, "attn_q_norm.weight"), dk);
            l.k_norm = w.vector(layer_tensor(il, "attn_k_norm.weight"), dk);
            l.wo = w.matrix(layer_tensor(il, "attn_output.weight"), hp.n_head * hp.head_dim_v, e);
            l.post_attn_norm = w.vector(layer_tensor(il, "post_attention_norm.weight"), e);
            l.ffn_norm = w.vector(layer_tensor(il, "ffn_norm.weight"), e);
            l.ffn_gate = w.matrix(layer_tensor(il, "ffn_gate.weight"), e, hp.n_ff);
            l.ffn_up = w.matrix(layer_tensor(il, "ffn_up.weight"), e, hp.n_ff);
            l.ffn_down = w.matrix(layer_tensor(il, "ffn_down.weight"), hp.n_ff, e);
            l.post_ffn_norm = w.vector(layer_tensor(il, "post_ffw_norm.weight"), e);
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
