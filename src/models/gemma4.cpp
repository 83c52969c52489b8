// Gemma 4 (text; dense E2B / E4B / 31B), as Hugging Face transformers' modeling_gemma4.py defines
// it and llama.cpp's converter writes it (GGUF arch "gemma4"; ../shared/research/GEMMA4.md):
//   x0 = E[ids] * sqrt(n_embd)
//   per-layer inputs (PLE, when embedding_length_per_layer_input P > 0), [T, n_layer, P]:
//     ple = (rms_norm(W_plmp x0 / sqrt(n_embd), per layer slice) + E_ple[ids] * sqrt(P)) / sqrt(2)
//   each layer: x += post_norm(attn(norm(x)));  x += post_norm(geglu_ffn(norm(x)));
//               x += post_norm(W_proj (gelu(W_gate x) * ple[:, l]));  x *= layer_output_scale
//   logits = 30 tanh(E rms_norm(x) / 30)
// Attention: q, k RMSNorm per head (weights), v RMSNorm per head without a weight, scale 1 (no
// 1/sqrt(d)), NEOX RoPE. Layers differ (attention.sliding_window_pattern): sliding layers have
// head_dim key_length_swa, RoPE base freq_base_swa over rope.dimension_count_swa dims and a window;
// full layers head_dim key_length and "proportional" RoPE (rope.dimension_count = head_dim with
// rope_freqs as frequency divisors: 1e30 leaves a pair unrotated). The last shared_kv_layers layers
// store no keys or values: each reads those of the last earlier layer of its own kind (E2B: 13 and
// 14), as transformers' kv_sharing does, and may be twice as wide in the FFN (feed_forward_length
// per layer). Full layers without attn_v (31B) use the key projection as values (K = V).
// Media rows (no token id) take PLE row 0, the pad token, as transformers and llama.cpp do.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/decoder.h"

namespace cactus {

namespace {

constexpr float kDefaultSoftcap = 30.0f;         // llama.cpp's default when the file has no key
constexpr size_t kMaxHeadDim = size_t(1) << 16;  // sanity bound (the activations follow the widest layer)

HParams read_gemma4_hparams(const GgufFile& file) {
    HParams hp = read_hparams(file, "gemma4", {false, true});
    if (!file.has("gemma4.final_logit_softcapping")) hp.final_logit_softcap = kDefaultSoftcap;
    return hp;
}

size_t read_dim(const GgufFile& file, const std::string& key, size_t fallback, size_t max) {
    const uint64_t v = file.has(key) ? file.get_uint(key) : fallback;
    if (v == 0 || v > max) fail("load gemma4: %s = %llu is out of range", key.c_str(), (unsigned long long)v);
    return static_cast<size_t>(v);
}

// What Gemma 4 adds to the common hyper-parameters.
struct Gemma4Params {
    std::vector<bool> sliding;  // [n_layer] attention.sliding_window_pattern
    size_t head_dim_swa_k = 0;
    size_t head_dim_swa_v = 0;
    size_t n_rot_swa = 0;
    float rope_base_swa = 0.0f;
    size_t first_shared = 0;  // layers from here on read an earlier layer's keys and values
    size_t ple_dim = 0;       // P; 0 = no per-layer inputs
};

Gemma4Params read_gemma4_params(const GgufFile& file, const HParams& hp) {
    Gemma4Params g;
    const std::string p = "gemma4.";
    const GgufValue& pattern = file.get_array(p + "attention.sliding_window_pattern");
    if (pattern.ints.size() != hp.n_layer) {
        fail("load gemma4: attention.sliding_window_pattern has %zu entries for %zu layers", pattern.ints.size(),
             hp.n_layer);
    }
    for (int64_t s : pattern.ints) g.sliding.push_back(s != 0);
    g.head_dim_swa_k = read_dim(file, p + "attention.key_length_swa", hp.head_dim_k, kMaxHeadDim);
    g.head_dim_swa_v = read_dim(file, p + "attention.value_length_swa", g.head_dim_swa_k, kMaxHeadDim);
    g.n_rot_swa = read_dim(file, p + "rope.dimension_count_swa", g.head_dim_swa_k, g.head_dim_swa_k);
    g.rope_base_swa = static_cast<float>(file.get_float(p + "rope.freq_base_swa", hp.rope_base));
    const uint64_t shared = file.get_uint(p + "attention.shared_kv_layers", 0);
    if (shared >= hp.n_layer)
        fail("load gemma4: attention.shared_kv_layers %llu >= %zu layers", (unsigned long long)shared, hp.n_layer);
    g.first_shared = hp.n_layer - static_cast<size_t>(shared);
    g.ple_dim = static_cast<size_t>(file.get_uint(p + "embedding_length_per_layer_input", 0));
    if (g.ple_dim > hp.n_embd * 16)
        fail("load gemma4: embedding_length_per_layer_input %zu is out of range", g.ple_dim);
    if (g.n_rot_swa % 2 != 0 || !(g.rope_base_swa > 0.0f)) {
        fail("load gemma4: rope.dimension_count_swa %zu must be even, freq_base_swa %g > 0", g.n_rot_swa,
             g.rope_base_swa);
    }
    // The 26B-A4B's experts run beside its dense FFN: loading the dense part alone would answer
    // wrongly without a word.
    if (file.get_uint(p + "expert_count", 0) > 0 || file.find_tensor("blk.0.ffn_gate_inp.weight")) {
        fail(
            "load gemma4: mixture-of-experts layers (gemma4.expert_count, ffn_gate_inp: the 26B-A4B) are not "
            "supported yet");
    }
    bool any_sliding = false;
    for (bool s : g.sliding) any_sliding = any_sliding || s;
    if (any_sliding && hp.sliding_window == 0) fail("load gemma4: attention.sliding_window is missing or 0");
    return g;
}

// The last layer before `first_shared` of the same kind (sliding or full) as layer il.
size_t kv_source_of(const Gemma4Params& g, size_t il) {
    for (size_t j = g.first_shared; j-- > 0;) {
        if (g.sliding[j] == g.sliding[il]) return j;
    }
    fail("load gemma4: KV-shared layer %zu has no earlier %s layer to read", il, g.sliding[il] ? "sliding" : "full");
}

struct PleLayer {
    Tensor gate;             // [P, n_embd] inp_gate
    Tensor proj;             // [n_embd, P]
    Tensor post_norm;        // [n_embd]
    float out_scale = 1.0f;  // layer_output_scale (1 when absent)
    bool scaled = false;
};

class Gemma4Model : public DecoderModel {
public:
    Gemma4Model(const GgufFile& file, const ModelOptions& options)
        : DecoderModel(file, options, read_gemma4_hparams(file)), g_(read_gemma4_params(file, hp_)) {
        WeightLoader& w = weights();
        if (std::find(g_.sliding.begin(), g_.sliding.end(), false) != g_.sliding.end()) {
            rope_freqs_ = w.host_vector("rope_freqs.weight", hp_.n_rot / 2);
        }
        load_layers(layer_specs(w));
        load_extras(w);
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(w.matrix(output_name, hp_.n_embd, hp_.n_vocab), w.vector("output_norm.weight", hp_.n_embd), ple_bytes());
        init_ple();
    }

protected:
    float embedding_scale() const override { return std::sqrt(static_cast<float>(hp_.n_embd)); }

    void begin_step(const Step& step) override {
        if (g_.ple_dim == 0) return;
        per_layer_inputs(step);
        ple_step_rows_ = step.n;
        upload_ple_ids(step.n, nullptr);
    }

    void forward_layer(const Step& step, size_t il) override {
        transformer_layer(step, il);
        const Activations a = act(step.n);
        if (g_.ple_dim > 0) ple_block(step.n, il, a);
        if (ple_[il].scaled) backend().scale(a.x, a.x, ple_[il].out_scale);
    }

    void narrowed_rows(const Step& narrowed, const std::vector<int32_t>& source_rows) override {
        if (g_.ple_dim > 0) upload_ple_ids(narrowed.n, source_rows.data());
    }

private:
    std::vector<LayerSpec> layer_specs(const WeightLoader& w) const {
        std::vector<LayerSpec> layers(hp_.n_layer);
        for (size_t il = 0; il < hp_.n_layer; ++il) {
            const bool sliding = g_.sliding[il];
            LayerSpec& l = layers[il];
            AttentionSpec& a = l.attn;
            a.n_head = hp_.n_head;
            a.n_head_kv = hp_.layer_n_head_kv[il];
            a.head_dim_k = sliding ? g_.head_dim_swa_k : hp_.head_dim_k;
            a.head_dim_v = sliding ? g_.head_dim_swa_v : hp_.head_dim_v;
            a.scale = 1.0f;
            a.rope = sliding ? RopeParams{RopeStyle::NEOX, g_.n_rot_swa, g_.rope_base_swa, 1.0f}
                             : RopeParams{RopeStyle::NEOX, hp_.n_rot, hp_.rope_base, hp_.rope_freq_scale,
                                          rope_freqs_.data()};
            if (a.rope.n_rot > a.head_dim_k)
                fail("load gemma4: layer %zu rotates %zu of %zu dims", il, a.rope.n_rot, a.head_dim_k);
            a.window = sliding ? hp_.sliding_window : 0u;
            a.qk_norm = true;
            a.v_norm = true;
            if (il >= g_.first_shared) a.kv_source = kv_source_of(g_, il);
            a.v_from_k = a.stores_kv() && !w.has(layer_tensor(il, "attn_v.weight"));
            l.ffn = {hp_.layer_n_ff[il], Activation::GELU_TANH};
            l.post_norms = true;
        }
        return layers;
    }

    void load_extras(WeightLoader& w) {
        const size_t e = hp_.n_embd;
        const size_t p = g_.ple_dim;
        ple_.resize(hp_.n_layer);
        for (size_t il = 0; il < hp_.n_layer; ++il) {
            PleLayer& l = ple_[il];
            if (p > 0) {
                l.gate = w.matrix(layer_tensor(il, "inp_gate.weight"), e, p);
                l.proj = w.matrix(layer_tensor(il, "proj.weight"), p, e);
                l.post_norm = w.vector(layer_tensor(il, "post_norm.weight"), e);
            }
            const std::string scale = layer_tensor(il, "layer_output_scale.weight");
            if (w.has(scale)) {
                l.out_scale = w.host_vector(scale, 1)[0];
                l.scaled = true;
            }
        }
        if (p == 0) return;
        const size_t width = hp_.n_layer * p;
        // Most of an E2B file, a few KB of it per token: it stays memory-mapped (weights locked in
        // memory or not), so only the rows read are resident.
        ple_table_ = w.mapped_table("per_layer_token_embd.weight", width, hp_.n_vocab);
        ple_model_proj_ = w.matrix("per_layer_model_proj.weight", e, width);
        ple_proj_norm_ = w.vector("per_layer_proj_norm.weight", p);
    }

    // The per-layer inputs [n_batch, n_layer * P] twice (token rows + projection), and the rows
    // each layer gathers from them [n_layer, n_batch] I32.
    size_t ple_bytes() const {
        const size_t b = n_batch();
        return g_.ple_dim == 0 ? 0
                               : 2 * b * hp_.n_layer * g_.ple_dim * sizeof(float) + hp_.n_layer * b * sizeof(int32_t);
    }

    void init_ple() {
        if (g_.ple_dim == 0) return;
        const size_t b = n_batch();
        const size_t width = hp_.n_layer * g_.ple_dim;
        ple_buffer_ = backend().alloc(ple_bytes());
        ple_inputs_ = make_tensor(ple_buffer_.get(), 0, DType::F32, width, b);                // [n_batch, L * P]
        ple_proj_ = make_tensor(ple_buffer_.get(), ple_inputs_.nb[2], DType::F32, width, b);  // [n_batch, L * P]
        ple_ids_ = make_tensor(ple_buffer_.get(), 2 * ple_inputs_.nb[2], DType::I32, b, hp_.n_layer);  // [L, n_batch]
    }

    // ple_inputs_ [n, L * P] = (rms_norm(W_plmp x0 / sqrt(n_embd)) + E_ple[ids] * sqrt(P)) / sqrt(2).
    void per_layer_inputs(const Step& step) {
        const size_t n = step.n;
        const size_t p = g_.ple_dim;
        Backend& be = backend();
        const Tensor tok = ple_inputs_.rows_view(0, n);
        const Tensor proj = ple_proj_.rows_view(0, n);
        be.get_rows(tok, ple_table_, step.tokens, std::sqrt(static_cast<float>(p)));
        nn().linear(proj, ple_model_proj_, act(n).x);  // x0: the scaled embeddings
        be.scale(proj, proj, 1.0f / std::sqrt(static_cast<float>(hp_.n_embd)));
        const Tensor slices = proj.reshaped(p, n * hp_.n_layer);  // [n * L, P]
        nn().rms_norm(slices, slices, ple_proj_norm_, hp_.rms_eps);
        be.add(tok, tok, proj);
        be.scale(tok, tok, 1.0f / std::sqrt(2.0f));
        tap("per_layer_inputs", -1, tok);
    }

    // Layer l gathers row (source row * L + l) of ple_inputs_ seen as [rows * L, P]: ids [L, n].
    void upload_ple_ids(size_t n, const int32_t* source_rows) {
        const size_t layers = hp_.n_layer;
        host_ids_.resize(layers * n);
        for (size_t l = 0; l < layers; ++l) {
            for (size_t i = 0; i < n; ++i) {
                const size_t row = source_rows ? static_cast<size_t>(source_rows[i]) : i;
                host_ids_[l * n + i] = static_cast<int32_t>(row * layers + l);
            }
        }
        const Tensor ids = make_tensor(ple_ids_.buffer, ple_ids_.offset, DType::I32, layers * n, 1);
        backend().upload(ids, host_ids_.data(), host_ids_.size() * sizeof(int32_t));
    }

    // x += post_norm(W_proj (gelu(W_gate x) * ple[:, il])), with a.gate / a.up as scratch.
    void ple_block(size_t n, size_t il, const Activations& a) {
        const PleLayer& l = ple_[il];
        const size_t p = g_.ple_dim;
        const Tensor gate = make_tensor(a.gate.buffer, a.gate.offset, DType::F32, p, n);  // [n, P]
        const Tensor inp = make_tensor(a.up.buffer, a.up.offset, DType::F32, p, n);       // [n, P]
        // ple_inputs_ of the step's rows seen as [rows * L, P]: one row per (token, layer).
        const Tensor table = ple_inputs_.rows_view(0, ple_step_rows_).reshaped(p, ple_step_rows_ * hp_.n_layer);
        const Tensor ids = make_tensor(ple_ids_.buffer, ple_ids_.offset + il * n * sizeof(int32_t), DType::I32, 1, n);
        nn().linear(gate, l.gate, a.x);
        backend().get_rows(inp, table, ids, 1.0f);
        backend().glu(gate, gate, inp, Activation::GELU_TANH);
        nn().linear(a.tmp, l.proj, gate);  // [n, n_embd]
        nn().rms_norm(a.tmp, a.tmp, l.post_norm, hp_.rms_eps);
        tap("ple_out", static_cast<int>(il), a.tmp);
        nn().residual(a.x, a.tmp);
    }

    const Gemma4Params g_;
    std::vector<float> rope_freqs_;  // [n_rot / 2] full layers' frequency divisors (RopeParams points here)
    std::vector<PleLayer> ple_;      // [n_layer]
    Tensor ple_table_;               // [n_vocab, L * P] per_layer_token_embd (mapped)
    Tensor ple_model_proj_;          // [L * P, n_embd]
    Tensor ple_proj_norm_;           // [P]
    std::unique_ptr<Buffer> ple_buffer_;
    Tensor ple_inputs_;         // [n_batch, L * P]
    Tensor ple_proj_;           // [n_batch, L * P]
    Tensor ple_ids_;            // [L, n_batch] I32 (as [L * n] for the step's n)
    size_t ple_step_rows_ = 0;  // rows ple_inputs_ holds this step (before any narrowing)
    std::vector<int32_t> host_ids_;
};

}  // namespace

std::unique_ptr<Model> load_gemma4(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<Gemma4Model>(file, options);
}

}  // namespace cactus
