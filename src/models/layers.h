#pragma once
// Shared pieces of the decoder architectures: hyper-parameters from GGUF metadata, weight lookup
// with shape checks, and DecoderModel, which owns the KV cache, the thread pool and the
// activation buffers (allocated once) and provides the building blocks every architecture file
// composes: embed, build_norm, build_qkv, build_rope, build_attention, build_ffn, build_output.
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "core/dtype.h"
#include "kv/kv_cache.h"
#include "models/rope_angles.h"
#include "models/model.h"
#include "ops/ops_ref.h"

namespace cactus {

class GgufFile;
class ThreadPool;

struct HParams {
    std::string arch;
    size_t n_vocab = 0;
    size_t n_embd = 0;
    size_t n_layer = 0;
    size_t n_head = 0;
    size_t n_head_kv = 0;
    size_t head_dim_k = 0;  // attention.key_length
    size_t head_dim_v = 0;  // attention.value_length
    size_t n_ff = 0;
    size_t n_ctx_train = 0;
    size_t n_rot = 0;             // rope.dimension_count
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;     // 1 / rope.scaling.factor for linear scaling
    uint32_t sliding_window = 0;      // attention.sliding_window (0 = none)
    float final_logit_softcap = 0.0f; // final_logit_softcapping (0 = none)
};

// Reads `<arch>.*` keys and checks them for consistency (non-zero, head counts divide, even rope
// dimensions, ...). n_vocab comes from token_embd.weight. Throws cactus::Error naming the key.
HParams read_hparams(const GgufFile& file, const std::string& arch);

// A weight matrix W: [n_out, n_in] (GGUF dims {n_in, n_out}), rows in `type`, mapped from the file.
struct Matrix {
    const void* data = nullptr;
    DType type = DType::F32;
    size_t n_in = 0;
    size_t n_out = 0;
    size_t row_bytes = 0;
};

// The tensor `name` with dims {n_in, n_out}; throws naming the tensor and both shapes.
Matrix require_matrix(const GgufFile& file, const std::string& name, size_t n_in, size_t n_out);
// A 1-D tensor of n elements dequantized to f32 (norm weights).
std::vector<float> require_vector(const GgufFile& file, const std::string& name, size_t n);
// "blk.<il>.<suffix>".
std::string layer_tensor(size_t il, const char* suffix);

// One chunk of tokens in flight: n tokens, token indices pos0 .. pos0 + n - 1 (each layer's RoPE
// position comes from the cache: KvCache::position).
struct Batch {
    size_t n = 0;
    size_t pos0 = 0;
};

class DecoderModel : public Model {
public:
    DecoderModel(const GgufFile& file, const ModelOptions& options, const HParams& hparams);
    ~DecoderModel() override;

    const ModelInfo& info() const override { return info_; }
    void forward(const int32_t* tokens, size_t n, std::vector<float>* logits,
                 std::vector<float>* all_logits) override;
    size_t n_past() const override;
    size_t truncate(size_t n) override;
    size_t context_room() const override;
    size_t kv_bytes() const override;
    size_t kv_compactions() const override;
    const KvCache& kv_cache() const { return *kv_; }

protected:
    // Runs every layer over x_ ([batch.n, n_embd], the embeddings on entry, the residual stream
    // on exit). The architecture's one job.
    virtual void forward_layers(const Batch& batch) = 0;
    // Scale applied to token embeddings (gemma: sqrt(n_embd)).
    virtual float embedding_scale() const { return 1.0f; }

    // Called by the architecture's constructor once weights are known: creates the cache.
    void init_cache(const std::vector<KvLayerSpec>& layers);
    void set_output(const Matrix& output, std::vector<float> output_norm);

    // y [n, rows of x's width] = rms_norm(x) * w, row by row.
    void build_norm(float* y, const float* x, const std::vector<float>& w, size_t n_rows, size_t width) const;
    // y [n, w.n_out] = x [n, w.n_in] W^T.
    void build_matmul(float* y, const Matrix& w, const float* x, size_t n) const;
    // Rotates q_ [n, n_head, head_dim_k] and k_ [n, n_head_kv, head_dim_k] at layer il's positions.
    void build_rope(size_t il, const Batch& batch, const RopeParams& params);
    // Writes k_ and v_ of the batch to layer il's cache rows.
    void store_kv(size_t il, const Batch& batch);
    // attn_ [n, n_head * head_dim_v] = softmax(scale * q k^T, masked) v over layer il's cache.
    void build_attention(size_t il, const Batch& batch, float scale);
    void attend_heads(size_t il, size_t token, size_t head, size_t n_q, float scale, AttentionWorkspace& ws);
    // y [n, n_embd] = down(act(gate(x)) * up(x)), x: [n, n_embd]; uses gate_ and up_.
    enum class Activation { SILU, GELU_TANH };
    void build_ffn(float* y, const float* x, size_t n, const Matrix& gate, const Matrix& up,
                   const Matrix& down, Activation act);
    // x[t] += y[t] for n_rows rows.
    void add_residual(float* x, const float* y, size_t n_rows, size_t width) const;

    const HParams hp_;
    ThreadPool& pool() const { return *pool_; }

    // Activations, allocated once for n_batch tokens.
    std::vector<float> x_;     // [n_batch, n_embd] residual stream
    std::vector<float> cur_;   // [n_batch, n_embd]
    std::vector<float> tmp_;   // [n_batch, n_embd]
    std::vector<float> q_;     // [n_batch, n_head * head_dim_k]
    std::vector<float> k_;     // [n_batch, n_head_kv * head_dim_k]
    std::vector<float> v_;     // [n_batch, n_head_kv * head_dim_v]
    std::vector<float> attn_;  // [n_batch, n_head * head_dim_v]
    std::vector<float> gate_;  // [n_batch, n_ff]
    std::vector<float> up_;    // [n_batch, n_ff]

private:
    void embed(const int32_t* tokens, size_t n);
    void forward_chunk(const int32_t* tokens, size_t n, float* logits_out, bool all_rows);

    const GgufFile& file_;
    size_t memory_budget_ = 0;  // ModelOptions::memory_budget (model_budget.h)
    ModelInfo info_;
    KvRequest kv_request_;
    size_t n_batch_ = 0;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<KvCache> kv_;
    const void* token_embd_ = nullptr;  // [n_vocab, n_embd]
    DType token_embd_type_ = DType::F32;
    size_t token_embd_row_bytes_ = 0;
    Matrix output_;                   // [n_vocab, n_embd]
    std::vector<float> output_norm_;  // [n_embd]
    std::vector<AttentionWorkspace> attn_ws_;  // [n_threads] attention scratch
    RopeAngles rope_angles_;                   // cos/sin of the batch positions, shared by layers
};

}  // namespace cactus
