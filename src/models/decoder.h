#pragma once
// The decoder core every text architecture builds on: it owns the backend, the weights common to
// all decoders (token embeddings, final norm, output head), the per-layer specs and the weights of
// the shared blocks, one KV cache per sequence and the activations (allocated once for n_batch
// tokens, after the weights are checked). decode() turns a Batch into one step: embeddings (token
// rows and spliced media rows), per-layer positions, the layers, and the output head over the
// marked rows.
//
// An architecture file derives from DecoderModel: it turns its hyper-parameters into one LayerSpec
// per layer, calls load_layers() and init() once, and overrides forward_layer() only where its
// layers add something to the shared pre-norm layer (transformer_layer). It never sees a host
// pointer or asks which device it runs on.
//
// After the last layer that writes state a later token reads (keys and values, conv rows), the
// remaining layers (Gemma 4's KV-sharing layers) write nothing a later token reads: the step then keeps only the rows whose logits are wanted
// (a prompt chunk without any skips those layers entirely). Results are the same bit for bit.
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kv/kv_cache.h"
#include "models/blocks.h"
#include "models/hparams.h"
#include "models/intermediates.h"
#include "models/layer_spec.h"
#include "models/layer_weights.h"
#include "models/model.h"
#include "models/weights.h"

namespace cactus {

class GgufFile;

// What one step hands the layers.
struct Step {
    size_t n = 0;     // rows in the step (tokens, or the output rows once narrowed)
    KvTokens kv;      // which cache and token each row belongs to
    Tensor pos_ring;  // [n] I32 positions in sliding layers (the token index)
    Tensor pos_full;  // [n] I32 positions in global layers (after compaction renumbering)
    Tensor tokens;    // [n] I32 token ids of the rows (media rows: 0); until the step is narrowed
};

// Activations of a step of n rows: views of the buffers allocated once, at the widest layer's
// widths (a layer's blocks narrow them to its own).
struct Activations {
    Tensor x;     // [n, n_embd] residual stream
    Tensor cur;   // [n, n_embd]
    Tensor tmp;   // [n, n_embd]
    Tensor q;     // [n, max q_width]
    Tensor k;     // [n, max k_width]
    Tensor v;     // [n, max v_width]
    Tensor attn;  // [n, max out_width]
    Tensor gate;  // [n, max n_ff]
    Tensor up;    // [n, max n_ff]
};

class DecoderModel : public Model {
public:
    DecoderModel(const GgufFile& file, const ModelOptions& options, const HParams& hparams);
    ~DecoderModel() override;

    const ModelInfo& info() const override { return info_; }
    void decode(const Batch& batch, std::vector<float>* logits) override;
    void decode_hidden(const Batch& batch, std::vector<float>* hidden) override;
    void decode_top(const Batch& batch, size_t k, std::vector<TopCandidates>* out, const TopBans* bans) override;
    void last_logits(std::vector<float>* logits) override;
    bool device_sampling() const override { return true; }
    size_t n_batch() const override { return n_batch_; }
    size_t n_past(int seq) const override;
    size_t truncate(size_t n, int seq) override;
    size_t context_room(int seq) const override;
    size_t reserve(size_t wanted, int seq) override;
    size_t kv_bytes() const override;
    size_t kv_compactions() const override;
    BackendCounters backend_counters() const override { return backend_->counters(); }
    void record_intermediates(const std::vector<std::string>& names) override { taps_.select(names); }
    Intermediates take_intermediates() override { return taps_.take(); }
    const KvCache& kv_cache(int seq = 0) const { return *kv_.at(static_cast<size_t>(seq)); }

protected:
    // Called before layer 0 of each step (per-step bookkeeping, per-layer inputs).
    virtual void begin_step(const Step& step) {}
    // One layer over act(step.n).x; by default the shared pre-norm layer.
    virtual void forward_layer(const Step& step, size_t il) { transformer_layer(step, il); }
    // The step was narrowed to its output rows (see above): row i of x now holds row
    // source_rows[i] of the step before. An architecture with per-row tensors of its own follows.
    virtual void narrowed_rows(const Step& narrowed, const std::vector<int32_t>& source_rows) {}
    // Scale applied to token embeddings (gemma: sqrt(n_embd)); media rows are taken as they are.
    virtual float embedding_scale() const { return 1.0f; }

    // Loads the shared blocks' weights of every layer: attention (mixer ATTENTION) and FFN.
    void load_layers(const std::vector<LayerSpec>& specs);
    // Called once by the architecture's constructor after load_layers() and its own weights: the
    // output head, then the caches and activations are allocated. `extra_bytes`: what the
    // architecture allocates itself after init (LFM2's conv states and step buffers), checked
    // against the memory budget with the caches and activations.
    void init(const Tensor& output, const Tensor& output_norm, size_t extra_bytes = 0);

    // The shared attention block up to its output projection: a.cur holds its input (normed); it
    // returns the heads' output, a view of a.attn [n, n_head * head_dim_v].
    Tensor attention_block(const Step& step, size_t il, const Activations& a);
    // x += post_norm(W_o attention(norm(x))) and x += post_norm(ffn(norm(x))) (post-norms per spec).
    // Without a post-norm the output projection adds into x itself (Backend::matmul_accumulate,
    // one fused kernel on a GPU) unless intermediates are recorded: attn_out / ffn_out need the
    // block's output on its own. The CPU computes the same bits either way.
    void attention_sublayer(const Step& step, size_t il);
    void ffn_sublayer(const Step& step, size_t il);
    bool folds_residual(const Tensor& post_norm) const;
    void transformer_layer(const Step& step, size_t il) {
        attention_sublayer(step, il);
        ffn_sublayer(step, il);
    }

    WeightLoader& weights() { return weights_; }
    const Blocks& nn() const { return nn_; }
    Backend& backend() const { return *backend_; }
    Activations act(size_t n) const;
    const LayerSpec& layer(size_t il) const { return layers_[il]; }
    size_t n_layers() const { return layers_.size(); }
    // The KV cache layer of layer il (its own, or its KV source's), and the positions of its rows.
    size_t kv_layer(size_t il) const { return kv_layer_[il]; }
    const Tensor& positions(const Step& step, size_t il) const;
    // Records a named intermediate when it is asked for ("attn_out", layer il; il < 0: global).
    void tap(const char* name, int il, const Tensor& t) { taps_.record(*backend_, name, il, t); }
    bool recording() const { return taps_.active(); }

    const HParams hp_;

private:
    void check_batch(const Batch& batch) const;
    void embed(const Batch& batch, const Tensor& x);
    const size_t* span_ends(const Batch& batch);  // step_last_ of the batch's bidirectional spans
    void upload_positions(Step& step);
    void output_rows(const Batch& batch);
    void narrow_to_outputs(Step& step);
    // decode() up to the output head; without outputs the marked rows are dropped.
    void run_step(const Batch& batch, bool outputs);
    // Rows [done, done + m) of out_rows_ through the final norm and, unless head_hidden_, the output
    // head and softcap into logits_: returns the rows ([m, n_embd] or [m, n_vocab]).
    Tensor head_rows(size_t done, size_t m);
    void output_head(std::vector<float>* logits);
    void top_head(size_t k, std::vector<TopCandidates>* out, const TopBans* bans);
    // -inf over the banned logits of rows [done, done + m) that ask (logits [m, n_vocab]).
    void ban_logits(const Tensor& logits, size_t done, size_t m, const TopBans& bans);

    ModelInfo info_;
    size_t n_batch_ = 0;
    size_t memory_budget_ = 0;  // ModelOptions::memory_budget (model_budget.h)
    std::unique_ptr<Backend> backend_;
    WeightLoader weights_;
    Blocks nn_;
    std::vector<LayerSpec> layers_;             // [n_layer]
    std::vector<AttentionWeights> attention_;   // [n_layer] (empty for other mixers)
    std::vector<FfnWeights> ffn_;               // [n_layer]
    std::vector<size_t> kv_layer_;              // [n_layer] KV cache layer (SIZE_MAX: none)
    size_t last_state_writer_ = 0;              // the last layer that writes state later tokens read
    Tensor token_embd_;                         // [n_vocab, n_embd]
    Tensor output_;                             // [n_vocab, n_embd]
    Tensor output_norm_;                        // [n_embd]
    std::vector<std::unique_ptr<KvCache>> kv_;  // [n_seq]
    std::vector<bool> ring_layer_;              // [n_kv_layers] sliding (ring) or global
    std::unique_ptr<Buffer> act_buffer_;        // every activation tensor below
    Activations full_;                          // [n_batch, ...] views
    Tensor ids_;                                // [n_batch] I32 token ids / output rows
    Tensor pos_ring_;                           // [n_batch] I32
    Tensor pos_full_;                           // [n_batch] I32
    Tensor logits_;                             // [n_logit_rows, n_vocab]
    size_t n_logit_rows_ = 0;
    // decode_top's results, one download a head pass: ids [m, k] I32, vals [m, k] F32 and stats
    // [m, 2] F32 packed from offset 0 (allocated once for n_logit_rows and kTopKMax: fixed addresses).
    std::unique_ptr<Buffer> top_buffer_;
    std::vector<float> top_host_;  // [2 m k + 2 m] its host copy
    // ban_logits' scatter: ids [capacity] I32 (row * n_vocab + id, -1 where a row bans none), then
    // [capacity] -inf, written when the buffer is made; grown when more entries come.
    std::unique_ptr<Buffer> ban_buffer_;
    size_t ban_capacity_ = 0;  // entries ban_buffer_ holds
    std::vector<int32_t> ban_host_;
    size_t logits_rows_ = 0;    // rows of logits_ holding the last step's logits for last_logits (0: none)
    bool head_hidden_ = false;  // decode_hidden(): the head returns the normed rows, not logits
    Taps taps_;
    // Per-step host scratch (reserved once).
    std::vector<KvCache*> step_cache_;
    std::vector<size_t> step_token_;
    std::vector<size_t> step_last_;  // [n] last token each query sees (bidirectional spans)
    std::vector<KvView> kv_views_;   // [n] the step's tokens in one layer (kv_batch), rebuilt per layer
    std::vector<int32_t> host_i32_;
    std::vector<int32_t> out_rows_;     // rows of x whose logits are wanted, in batch order
    std::vector<int32_t> source_rows_;  // narrow_to_outputs: the rows kept
};

}  // namespace cactus
