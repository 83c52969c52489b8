// Gemma 3 (text): embeddings scaled by sqrt(n_embd); RMSNorm before and after both attention and
// feed-forward (the GGUF converter already stores the norm weights as 1 + w); per-head RMSNorm of
// queries and keys; NEOX-style RoPE; queries scaled by 1/sqrt(key_length); GeGLU (tanh GELU).
// Layers alternate five sliding-window layers (window attention.sliding_window, RoPE base 10000)
// with one global layer (RoPE base rope.freq_base): layer il is global when (il + 1) % 6 == 0.
// Sliding layers become rings without sink rows: the trained model's local layers see exactly the
// window, and so do ours (docs/LONG_CONTEXT.md).
#include <cmath>

#include "core/error.h"
#include "models/decoder.h"

namespace cactus {

namespace {

constexpr size_t kSlidingPattern = 6;
constexpr float kSlidingRopeBase = 10000.0f;

std::vector<LayerSpec> gemma3_layers(const HParams& hp) {
    if (hp.sliding_window == 0) fail("load gemma3: gemma3.attention.sliding_window is missing or 0");
    std::vector<LayerSpec> layers(hp.n_layer);
    for (size_t il = 0; il < hp.n_layer; ++il) {
        const bool sliding = (il + 1) % kSlidingPattern != 0;
        LayerSpec& l = layers[il];
        l.attn.n_head = hp.n_head;
        l.attn.n_head_kv = hp.n_head_kv;
        l.attn.head_dim_k = hp.head_dim_k;
        l.attn.head_dim_v = hp.head_dim_v;
        l.attn.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
        l.attn.rope = sliding ? RopeParams{RopeStyle::NEOX, hp.n_rot, kSlidingRopeBase, 1.0f}
                              : RopeParams{RopeStyle::NEOX, hp.n_rot, hp.rope_base, hp.rope_freq_scale};
        l.attn.window = sliding ? hp.sliding_window : 0u;
        l.attn.qk_norm = true;
        l.ffn = {hp.layer_n_ff[il], Activation::GELU_TANH};
        l.post_norms = true;
    }
    return layers;
}

class Gemma3Model : public DecoderModel {
public:
    Gemma3Model(const GgufFile& file, const ModelOptions& options)
        : DecoderModel(file, options, read_hparams(file, "gemma3")) {
        load_layers(gemma3_layers(hp_));
        WeightLoader& w = weights();
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(w.matrix(output_name, hp_.n_embd, hp_.n_vocab), w.vector("output_norm.weight", hp_.n_embd));
    }

protected:
    float embedding_scale() const override { return std::sqrt(static_cast<float>(hp_.n_embd)); }
};

}  // namespace

std::unique_ptr<Model> load_gemma3(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<Gemma3Model>(file, options);
}

}  // namespace cactus
