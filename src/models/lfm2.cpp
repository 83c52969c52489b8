// LFM2 (Liquid AI; Hugging Face Lfm2ForCausalLM, GGUF arch "lfm2"): a hybrid of short convolutions
// and grouped-query attention, as llama.cpp's src/models/lfm2.cpp defines it. Every layer is
//   x += op(rms_norm(x, attn_norm));  x += down(silu(gate h) * up h), h = rms_norm(x, ffn_norm)
// where op is, for a conv layer (attention.head_count_kv[il] == 0):
//   (B | C | xc) = in_proj(h) split in thirds of n_embd; Bx = B * xc;
//   y = C * conv(Bx), a causal depthwise convolution over the sequence's tokens with L =
//   shortconv.l_cache taps per channel and no bias (the previous L - 1 Bx rows of the sequence come
//   from its conv state, src/kv/conv_state.h; before the first token they are zero); out_proj(y);
// and for an attention layer: q, k, v projections (no bias), RMSNorm over each query and key head
// ([head_dim] weights), NEOX-style RoPE, grouped-query attention scaled by 1/sqrt(head_dim), the
// output projection. The final norm is token_embd_norm.weight (llama.cpp's name for it); the output
// head is output.weight or the tied token embeddings. With attention.sliding_window set, attention
// layers keep a sliding ring (as llama.cpp's iswa variant); conv layers have no KV rows, so KV
// compaction touches attention layers only (docs/LONG_CONTEXT.md, "LFM2").
#include <cmath>

#include "core/error.h"
#include "gguf/gguf.h"
#include "kv/conv_state.h"
#include "models/decoder.h"

namespace cactus {

namespace {

// A conv layer's own weights (attention layers use the shared blocks' weights).
struct Lfm2Conv {
    Tensor norm;       // [n_embd] (the operator norm, attn_norm)
    Tensor in_proj;    // [3 * n_embd, n_embd]
    Tensor conv_taps;  // [n_embd, L] F32
    Tensor out_proj;   // [n_embd, n_embd]
    size_t index = 0;  // the conv state of the layer
};

size_t read_l_cache(const GgufFile& file) {
    const uint64_t l = file.get_uint("lfm2.shortconv.l_cache");
    if (l < 2 || l > 64) fail("load lfm2: lfm2.shortconv.l_cache = %llu is not in [2, 64]", (unsigned long long)l);
    return static_cast<size_t>(l);
}

class Lfm2Model : public DecoderModel {
public:
    Lfm2Model(const GgufFile& file, const ModelOptions& options)
        : DecoderModel(file, options, read_hparams(file, "lfm2", {true, false})), l_cache_(read_l_cache(file)) {
        if (!file.get_bool("lfm2.attention.causal", true)) {
            fail("load lfm2: lfm2.attention.causal is false (a bidirectional embedding model, not a decoder)");
        }
        load_layers(lfm2_layers(hp_));
        load_conv_layers();
        WeightLoader& w = weights();
        const char* output_name = w.has("output.weight") ? "output.weight" : "token_embd.weight";
        init(w.matrix(output_name, hp_.n_embd, hp_.n_vocab), w.vector("token_embd_norm.weight", hp_.n_embd),
             conv_buffer_bytes());
        init_conv_state();
    }

    // Keeps n tokens when the conv ring allows, else the last conv checkpoint before n (the caller
    // recomputes the rest), else nothing; the KV cache follows (it may keep nothing, after compaction).
    size_t truncate(size_t n, int seq) override {
        if (n >= n_past(seq)) return DecoderModel::truncate(n, seq);
        ConvState& c = conv_.at(static_cast<size_t>(seq));
        const size_t kept = DecoderModel::truncate(c.restorable(n), seq);  // that, or 0
        copies_.clear();
        c.truncate(kept, &copies_);
        restore_rows();
        return kept;
    }

    size_t kv_bytes() const override { return DecoderModel::kv_bytes() + conv_bytes_; }

protected:
    void begin_step(const Step& step) override { prepare_conv(step); }

    void forward_layer(const Step& step, size_t il) override {
        if (layer(il).mixer == Mixer::ATTENTION) {
            transformer_layer(step, il);
            return;
        }
        const Activations a = act(step.n);
        const Lfm2Conv& c = conv_layers_[il];
        nn().rms_norm(a.cur, a.x, c.norm, hp_.rms_eps);  // [n, n_embd]
        conv_block(a, c, step.n);
        tap("attn_out", static_cast<int>(il), a.tmp);
        nn().residual(a.x, a.tmp);
        ffn_sublayer(step, il);
    }

private:
    // Attention layers (attention.head_count_kv[il] != 0) as the shared blocks run them; conv
    // layers share only the feed-forward block.
    static std::vector<LayerSpec> lfm2_layers(const HParams& hp) {
        std::vector<LayerSpec> layers(hp.n_layer);
        for (size_t il = 0; il < hp.n_layer; ++il) {
            LayerSpec& l = layers[il];
            l.ffn = {hp.layer_n_ff[il], Activation::SILU};
            if (hp.layer_n_head_kv[il] == 0) {
                l.mixer = Mixer::SHORT_CONV;
                continue;
            }
            l.attn.n_head = hp.n_head;
            l.attn.n_head_kv = hp.n_head_kv;
            l.attn.head_dim_k = hp.head_dim_k;
            l.attn.head_dim_v = hp.head_dim_v;
            l.attn.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
            l.attn.rope = {RopeStyle::NEOX, hp.n_rot, hp.rope_base, hp.rope_freq_scale};
            l.attn.window = hp.sliding_window;
            l.attn.qk_norm = true;
        }
        return layers;
    }

    void load_conv_layers() {
        const size_t e = hp_.n_embd;
        WeightLoader& w = weights();
        conv_layers_.resize(n_layers());
        for (size_t il = 0; il < n_layers(); ++il) {
            if (layer(il).mixer != Mixer::SHORT_CONV) continue;
            Lfm2Conv& c = conv_layers_[il];
            c.index = n_conv_++;
            c.norm = w.vector(layer_tensor(il, "attn_norm.weight"), e);
            c.in_proj = w.matrix(layer_tensor(il, "shortconv.in_proj.weight"), e, 3 * e);
            c.conv_taps = w.f32_rows(layer_tensor(il, "shortconv.conv.weight"), l_cache_, e);
            c.out_proj = w.matrix(layer_tensor(il, "shortconv.out_proj.weight"), e, e);
        }
        if (n_conv_ == 0) fail("load lfm2: attention.head_count_kv marks no conv layer (0 entries)");
    }

    size_t ring() const { return std::max(ConvState::kRingTokens, l_cache_ - 1); }
    size_t seq_rows() const { return ConvState::rows(l_cache_ - 1, ring(), ConvState::slots_for(info().n_ctx)); }

    // Bytes of buffer_: the conv states of every sequence, then the step buffers of n_batch rows
    // (every factor is bounded by now: n_seq <= 256, n_batch <= n_ctx * n_seq, dims <= 2^20).
    size_t conv_buffer_bytes() const {
        const size_t e = hp_.n_embd;
        const size_t b = n_batch();
        const size_t d = l_cache_ - 1;
        const size_t floats = n_conv_ * info().n_seq * seq_rows() * e + b * 3 * e + b * e + d * e;
        return floats * sizeof(float) + (b * (d + 2) + 2 * d) * sizeof(int32_t);
    }

    // Conv rows of every sequence (zeros at first) and the step buffers of the conv layers.
    void init_conv_state() {
        const size_t e = hp_.n_embd;
        const size_t n_seq = info().n_seq;
        const size_t rows = n_seq * seq_rows();  // per conv layer
        const size_t b = n_batch();
        const size_t d = l_cache_ - 1;
        Backend& be = nn().backend();
        buffer_ = be.alloc(conv_buffer_bytes());
        size_t offset = 0;
        auto next = [&](DType type, size_t width, size_t n_rows) {
            const Tensor t = make_tensor(buffer_.get(), offset, type, width, n_rows);
            offset += t.nb[2];
            return t;
        };
        const std::vector<float> zeros(rows * e, 0.0f);
        for (size_t c = 0; c < n_conv_; ++c) {
            state_.push_back(next(DType::F32, e, rows));  // [n_seq * seq_rows, n_embd]
            be.upload(state_.back(), zeros.data(), zeros.size() * sizeof(float));
        }
        bcx_ = next(DType::F32, 3 * e, b);      // [n_batch, 3 * n_embd]
        conv_y_ = next(DType::F32, e, b);       // [n_batch, n_embd]
        restore_ = next(DType::F32, e, d);      // [L - 1, n_embd]
        hist_ = next(DType::I32, d, b);         // [n_batch, L - 1]
        store_ = next(DType::I32, 1, b);        // [n_batch]
        ckpt_ = next(DType::I32, 1, b);         // [n_batch]
        restore_src_ = next(DType::I32, 1, d);  // [L - 1]
        restore_dst_ = next(DType::I32, 1, d);  // [L - 1]
        conv_bytes_ = n_conv_ * rows * e * sizeof(float);
        for (size_t s = 0; s < n_seq; ++s) {
            conv_.emplace_back(d, ring(), ConvState::slots_for(info().n_ctx), s * seq_rows());
            caches_.push_back(&kv_cache(static_cast<int>(s)));
        }
    }

    // Copies the checkpoint rows a truncate restored into the ring, in every conv layer.
    void restore_rows() {
        if (copies_.empty()) return;
        CACTUS_ASSERT(copies_.size() == l_cache_ - 1);
        std::vector<int32_t> src, dst;
        for (const auto& [from, to] : copies_) {
            src.push_back(static_cast<int32_t>(from));
            dst.push_back(static_cast<int32_t>(to));
        }
        Backend& be = nn().backend();
        be.upload(restore_src_, src.data(), src.size() * sizeof(int32_t));
        be.upload(restore_dst_, dst.data(), dst.size() * sizeof(int32_t));
        for (const Tensor& table : state_) {
            be.get_rows(restore_, table, restore_src_, 1.0f);
            be.set_rows(table, restore_, restore_dst_);
        }
    }

    size_t seq_of(const KvCache* cache) const {
        for (size_t s = 0; s < caches_.size(); ++s)
            if (caches_[s] == cache) return s;
        fail("lfm2: a batch row belongs to no sequence's cache");
    }

    // Where each token's L - 1 predecessors are (this batch or the conv state), which rows the
    // state keeps, then the conv states claim the step's tokens.
    void prepare_conv(const Step& step) {
        const size_t d = l_cache_ - 1;
        const size_t n_seq = conv_.size();
        seq_rows_.assign(n_seq, {});
        host_hist_.assign(step.n * d, -1);
        host_store_.assign(step.n, -1);
        host_ckpt_.assign(step.n, -1);
        for (size_t i = 0; i < step.n; ++i) {
            const size_t s = seq_of(step.kv.cache[i]);
            const size_t t = step.kv.token[i];
            std::vector<int32_t>& rows = seq_rows_[s];
            if (t != conv_[s].n_past() + rows.size()) {
                fail("lfm2: token %zu of sequence %zu does not continue its conv state at %zu", t, s,
                     conv_[s].n_past() + rows.size());
            }
            for (size_t lag = 1; lag <= d && lag <= t; ++lag) {
                int32_t& where = host_hist_[i * d + lag - 1];
                if (lag <= rows.size()) {
                    where = rows[rows.size() - lag];
                } else {
                    CACTUS_ASSERT(conv_[s].holds(t - lag));
                    where = -2 - static_cast<int32_t>(conv_[s].row_of(t - lag));
                }
            }
            host_ckpt_[i] = static_cast<int32_t>(conv_[s].checkpoint_row(t));
            rows.push_back(static_cast<int32_t>(i));
        }
        for (size_t s = 0; s < n_seq; ++s) {
            const std::vector<int32_t>& rows = seq_rows_[s];
            const size_t first = rows.size() > conv_[s].ring() ? rows.size() - conv_[s].ring() : 0;
            for (size_t k = first; k < rows.size(); ++k) {
                host_store_[static_cast<size_t>(rows[k])] =
                    static_cast<int32_t>(conv_[s].row_of(conv_[s].n_past() + k));
            }
            conv_[s].append(rows.size());
        }
        Backend& be = nn().backend();
        be.upload(hist_.rows_view(0, step.n), host_hist_.data(), host_hist_.size() * sizeof(int32_t));
        be.upload(store_.rows_view(0, step.n), host_store_.data(), host_store_.size() * sizeof(int32_t));
        be.upload(ckpt_.rows_view(0, step.n), host_ckpt_.data(), host_ckpt_.size() * sizeof(int32_t));
    }

    // a.cur [n, n_embd] normed input -> a.tmp [n, n_embd]; a.cur is reused for Bx.
    void conv_block(const Activations& a, const Lfm2Conv& l, size_t n) const {
        const Tensor bcx = bcx_.rows_view(0, n);   // [n, 3 * n_embd] = (B | C | x)
        const Tensor y = conv_y_.rows_view(0, n);  // [n, n_embd]
        const Tensor& state = state_[l.index];
        nn().linear(bcx, l.in_proj, a.cur);
        nn().backend().short_conv(y, a.cur, bcx, l.conv_taps, state, hist_.rows_view(0, n));  // a.cur = Bx
        nn().backend().set_rows(state, a.cur, store_.rows_view(0, n));                        // the ring
        nn().backend().set_rows(state, a.cur, ckpt_.rows_view(0, n));                         // checkpoint rows
        nn().linear(a.tmp, l.out_proj, y);
    }

    const size_t l_cache_;
    size_t n_conv_ = 0;
    std::vector<Lfm2Conv> conv_layers_;  // [n_layer] (conv layers only)
    std::unique_ptr<Buffer> buffer_;     // conv states, then the step buffers below
    std::vector<Tensor> state_;          // [n_conv] each [n_seq * ring, n_embd] Bx rows
    Tensor bcx_;                         // [n_batch, 3 * n_embd]
    Tensor conv_y_;                      // [n_batch, n_embd]
    Tensor hist_;                        // [n_batch, L - 1] I32 (short_conv_ref's hist)
    Tensor store_;                       // [n_batch] I32 ring row of each token, -1 = not kept
    Tensor ckpt_;                        // [n_batch] I32 checkpoint row of each token, -1 = none
    Tensor restore_;                     // [L - 1, n_embd] rows a truncate copies back into the ring
    Tensor restore_src_;                 // [L - 1] I32
    Tensor restore_dst_;                 // [L - 1] I32
    size_t conv_bytes_ = 0;
    std::vector<ConvState> conv_;         // [n_seq]
    std::vector<const KvCache*> caches_;  // [n_seq] which cache is which sequence
    // Per-step host scratch.
    std::vector<std::vector<int32_t>> seq_rows_;
    std::vector<int32_t> host_hist_;
    std::vector<int32_t> host_store_;
    std::vector<int32_t> host_ckpt_;
    std::vector<std::pair<size_t, size_t>> copies_;
};

}  // namespace

std::unique_ptr<Model> load_lfm2(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<Lfm2Model>(file, options);
}

}  // namespace cactus
