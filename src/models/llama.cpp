// The Llama block and the families that differ from it only in their layer specs:
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

std::vector<LayerSpec> llama_layers(const HParams& hp, const LlamaVariant& variant) {
    LayerSpec spec;
    spec.attn.n_head = hp.n_head;
    spec.attn.n_head_kv = hp.n_head_kv;
    spec.attn.head_dim_k = hp.head_dim_k;
    spec.attn.head_dim_v = hp.head_dim_v;
    spec.attn.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    spec.attn.rope = {variant.rope, hp.n_rot, hp.rope_base, hp.rope_freq_scale};
    spec.attn.qkv_bias = variant.qkv_bias;
    spec.attn.qk_norm = variant.qk_norm;
    spec.ffn.act = Activation::SILU;
    std::vector<LayerSpec> layers(hp.n_layer, spec);
    for (size_t il = 0; il < hp.n_layer; ++il) layers[il].ffn.n_ff = hp.layer_n_ff[il];
    return layers;
}

class LlamaModel : public DecoderModel {
public:
    LlamaModel(const GgufFile& file, const ModelOptions& options, const LlamaVariant& variant)
        : DecoderModel(file, options, read_hparams(file, variant.arch)) {
        load_layers(llama_layers(hp_, variant));
        WeightLoader& w = weights();
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(w.matrix(output_name, hp_.n_embd, hp_.n_vocab), w.vector("output_norm.weight", hp_.n_embd));
    }
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
