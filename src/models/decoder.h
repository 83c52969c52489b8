#pragma once
// The decoder core every text architecture builds on: it owns the backend, the weights common to
// all decoders (token embeddings, final norm, output head), one KV cache per sequence and the
// activations (allocated once for n_batch tokens, after the weights are checked). decode() turns a
// Batch into one step: embeddings (token rows and spliced media rows), per-layer positions, the
// architecture's layers (forward_layers), and the output head over the marked rows.
//
// An architecture file derives from DecoderModel, loads its layer weights with weights(), calls
// init() once, and writes forward_layers() with the building blocks (nn()) over the step's
// activations (act(n)). It never sees a host pointer or asks which device it runs on.
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kv/kv_cache.h"
#include "models/blocks.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/weights.h"

namespace cactus {

class GgufFile;

// What one step hands the layers.
struct Step {
    size_t n = 0;     // tokens in the step
    KvBatch kv;       // which cache and token each row belongs to
    Tensor pos_ring;  // [n] I32 positions in sliding layers (the token index)
    Tensor pos_full;  // [n] I32 positions in global layers (after compaction renumbering)
};

// Activations of a step of n tokens: views of the buffers allocated once.
struct Activations {
    Tensor x;     // [n, n_embd] residual stream
    Tensor cur;   // [n, n_embd]
    Tensor tmp;   // [n, n_embd]
    Tensor q;     // [n, n_head * head_dim_k]
    Tensor k;     // [n, n_head_kv * head_dim_k]
    Tensor v;     // [n, n_head_kv * head_dim_v]
    Tensor attn;  // [n, n_head * head_dim_v]
    Tensor gate;  // [n, n_ff]
    Tensor up;    // [n, n_ff]
};

class DecoderModel : public Model {
public:
    DecoderModel(const GgufFile& file, const ModelOptions& options, const HParams& hparams);
    ~DecoderModel() override;

    const ModelInfo& info() const override { return info_; }
    void decode(const Batch& batch, std::vector<float>* logits) override;
    size_t n_batch() const override { return n_batch_; }
    size_t n_past(int seq) const override;
    size_t truncate(size_t n, int seq) override;
    size_t context_room(int seq) const override;
    size_t reserve(size_t wanted, int seq) override;
    size_t kv_bytes() const override;
    size_t kv_compactions() const override;
    const KvCache& kv_cache(int seq = 0) const { return *kv_.at(static_cast<size_t>(seq)); }

protected:
    // Runs every layer over act(step.n).x (the embeddings on entry, the residual stream on exit).
    virtual void forward_layers(const Step& step) = 0;
    // Scale applied to token embeddings (gemma: sqrt(n_embd)); media rows are taken as they are.
    virtual float embedding_scale() const { return 1.0f; }

    // Called once by the architecture's constructor after its weights are loaded: the output head,
    // then the caches and activations are allocated. `layers`: one spec per layer that keeps keys
    // and values, in order (every layer, or a hybrid model's attention layers only: its attention
    // calls and positions() then take the index into `layers`). `extra_bytes`: what the
    // architecture allocates itself after init (LFM2's conv states and step buffers), checked
    // against the memory budget with the caches and activations.
    void init(const std::vector<KvLayerSpec>& layers, const Tensor& output, const Tensor& output_norm,
              size_t extra_bytes = 0);

    WeightLoader& weights() { return weights_; }
    const Blocks& nn() const { return nn_; }
    Activations act(size_t n) const;
    // The positions of layer il's rows in this step.
    const Tensor& positions(const Step& step, size_t il) const;

    const HParams hp_;

private:
    void check_batch(const Batch& batch) const;
    void embed(const Batch& batch, const Tensor& x);
    const size_t* span_ends(const Batch& batch);  // step_last_ of the batch's bidirectional spans
    void upload_positions(Step& step);
    void output_head(const Batch& batch, std::vector<float>* logits);

    ModelInfo info_;
    size_t n_batch_ = 0;
    size_t memory_budget_ = 0;  // ModelOptions::memory_budget (model_budget.h)
    std::unique_ptr<Backend> backend_;
    WeightLoader weights_;
    Blocks nn_;
    Tensor token_embd_;                         // [n_vocab, n_embd]
    Tensor output_;                             // [n_vocab, n_embd]
    Tensor output_norm_;                        // [n_embd]
    std::vector<std::unique_ptr<KvCache>> kv_;  // [n_seq]
    std::vector<bool> ring_layer_;              // [n_layer] sliding (ring) or global
    std::unique_ptr<Buffer> act_buffer_;        // every activation tensor below
    Activations full_;                          // [n_batch, ...] views
    Tensor ids_;                                // [n_batch] I32 token ids / output rows
    Tensor pos_ring_;                           // [n_batch] I32
    Tensor pos_full_;                           // [n_batch] I32
    Tensor logits_;                             // [n_logit_rows, n_vocab]
    size_t n_logit_rows_ = 0;
    // Per-step host scratch (reserved once).
    std::vector<KvCache*> step_cache_;
    std::vector<size_t> step_token_;
    std::vector<size_t> step_last_;  // [n] last token each query sees (bidirectional spans)
    std::vector<int32_t> host_i32_;
};

}  // namespace cactus
