// The Llama block and the families that differ from it only in small parts:
//   llama  (and SmolLM, Mistral-style dense models): pre-norm blocks with RMSNorm, RoPE in the
//          normal (interleaved-pair) style, grouped-query attention, SwiGLU feed-forward;
//   qwen2  (Qwen2 / Qwen2.5): biases on the query, key and value projections, NEOX-style RoPE;
//   qwen3  (dense): no projection biases; RMSNorm over each query and key head (qk-norm, weights
//          [head_dim] shared by the heads) before NEOX-style RoPE. head_dim is its own
//          hyper-parameter (attention.key_length), not n_embd / n_head. Thinking is a chat-template
//          matter (enable_thinking); see src/chat/format_hermes.cpp for the reply format.
// The output head is tied to the token embeddings when the file has no output.weight.
#include <cmath>

#include "models/decoder.h"

namespace cactus {

namespace {

// What a family changes in the Llama block.
struct LlamaVariant {
    const char* arch;
    RopeStyle rope;
    bool qkv_bias;  // attn_{q,k,v}.bias
    bool qk_norm;   // attn_{q,k}_norm.weight
};

constexpr LlamaVariant kLlama{"llama", RopeStyle::NORMAL, false, false};
constexpr LlamaVariant kQwen2{"qwen2", RopeStyle::NEOX, true, false};
constexpr LlamaVariant kQwen3{"qwen3", RopeStyle::NEOX, false, true};

struct LlamaLayer {
    Tensor attn_norm;  // [n_embd]
    Tensor wq;         // [n_head * head_dim, n_embd]
    Tensor bq;         // [n_head * head_dim] (qwen2; empty otherwise)
    Tensor wk;         // [n_head_kv * head_dim, n_embd]
    Tensor bk;         // [n_head_kv * head_dim] (qwen2)
    Tensor wv;         // [n_head_kv * head_dim_v, n_embd]
    Tensor bv;         // [n_head_kv * head_dim_v] (qwen2)
    Tensor q_norm;     // [head_dim] (qwen3)
    Tensor k_norm;     // [head_dim] (qwen3)
    Tensor wo;         // [n_embd, n_head * head_dim_v]
    Tensor ffn_norm;   // [n_embd]
    Tensor ffn_gate;   // [n_ff, n_embd]
    Tensor ffn_up;     // [n_ff, n_embd]
    Tensor ffn_down;   // [n_embd, n_ff]
};

class LlamaModel : public DecoderModel {
public:
    LlamaModel(const GgufFile& file, const ModelOptions& options, const LlamaVariant& variant)
        : DecoderModel(file, options, read_hparams(file, variant.arch)) {
        const HParams& hp = hp_;
        const size_t e = hp.n_embd;
        const size_t q_width = hp.n_head * hp.head_dim_k;
        const size_t k_width = hp.n_head_kv * hp.head_dim_k;
        const size_t v_width = hp.n_head_kv * hp.head_dim_v;
        const size_t o_width = hp.n_head * hp.head_dim_v;
        WeightLoader& w = weights();
        layers_.resize(hp.n_layer);
        for (size_t il = 0; il < hp.n_layer; ++il) {
            LlamaLayer& l = layers_[il];
            l.attn_norm = w.vector(layer_tensor(il, "attn_norm.weight"), e);
            l.wq = w.matrix(layer_tensor(il, "attn_q.weight"), e, q_width);
            l.wk = w.matrix(layer_tensor(il, "attn_k.weight"), e, k_width);
            l.wv = w.matrix(layer_tensor(il, "attn_v.weight"), e, v_width);
            if (variant.qkv_bias) {
                l.bq = w.vector(layer_tensor(il, "attn_q.bias"), q_width);
                l.bk = w.vector(layer_tensor(il, "attn_k.bias"), k_width);
                l.bv = w.vector(layer_tensor(il, "attn_v.bias"), v_width);
            }
            if (variant.qk_norm) {
                l.q_norm = w.vector(layer_tensor(il, "attn_q_norm.weight"), hp.head_dim_k);
                l.k_norm = w.vector(layer_tensor(il, "attn_k_norm.weight"), hp.head_dim_k);
            }
            l.wo = w.matrix(layer_tensor(il, "attn_output.weight"), o_width, e);
            l.ffn_norm = w.vector(layer_tensor(il, "ffn_norm.weight"), e);
            l.ffn_gate = w.matrix(layer_tensor(il, "ffn_gate.weight"), e, hp.n_ff);
            l.ffn_up = w.matrix(layer_tensor(il, "ffn_up.weight"), e, hp.n_ff);
            l.ffn_down = w.matrix(layer_tensor(il, "ffn_down.weight"), hp.n_ff, e);
        }
        rope_ = {variant.rope, hp.n_rot, hp.rope_base, hp.rope_freq_scale};
        KvLayerSpec spec;
        spec.k_width = k_width;
        spec.v_width = v_width;
        spec.n_head_kv = hp.n_head_kv;
        spec.rope = rope_;
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(std::vector<KvLayerSpec>(hp.n_layer, spec), w.matrix(output_name, e, hp.n_vocab),
             w.vector("output_norm.weight", e));
    }

protected:
    void forward_layers(const Step& step) override {
        const Activations a = act(step.n);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));
        for (size_t il = 0; il < layers_.size(); ++il) {
            const LlamaLayer& l = layers_[il];
            nn().rms_norm(a.cur, a.x, l.attn_norm, hp_.rms_eps);  // [n, n_embd]
            // q [n, n_head * head_dim], k [n, n_head_kv * head_dim], v [n, n_head_kv * head_dim_v]
            nn().linears(a.cur, {{a.q, l.wq, l.bq}, {a.k, l.wk, l.bk}, {a.v, l.wv, l.bv}});
            if (!l.q_norm.empty()) {
                nn().head_norm(a.q, hp_.n_head, l.q_norm, hp_.rms_eps);  // per head, [head_dim] weight
                nn().head_norm(a.k, hp_.n_head_kv, l.k_norm, hp_.rms_eps);
            }
            nn().rope(a.q, hp_.n_head, positions(step, il), rope_);
            nn().rope(a.k, hp_.n_head_kv, positions(step, il), rope_);
            nn().attention(a.attn, il, step.kv, a.q, a.k, a.v, hp_.n_head, scale);  // [n, n_head * head_dim_v]
            nn().linear(a.tmp, l.wo, a.attn);                                       // [n, n_embd]
            nn().residual(a.x, a.tmp);

            nn().rms_norm(a.cur, a.x, l.ffn_norm, hp_.rms_eps);
            nn().ffn(a.tmp, a.cur, l.ffn_gate, l.ffn_up, l.ffn_down, Activation::SILU, a.gate, a.up);
            nn().residual(a.x, a.tmp);
        }
    }

private:
    std::vector<LlamaLayer> layers_;
    RopeParams rope_;
};

}  // namespace

std::unique_ptr<Model> load_llama(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<LlamaModel>(file, options, kLlama);
}

std::unique_ptr<Model> load_qwen2(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<LlamaModel>(file, options, kQwen2);
}

std::unique_ptr<Model> load_qwen3(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<LlamaModel>(file, options, kQwen3);
}

}  // namespace cactus
