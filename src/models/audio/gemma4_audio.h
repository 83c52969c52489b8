#pragma once
// Gemma 4's audio tower (an mmproj with clip.audio.projector_type "gemma4a", as llama.cpp's
// converter writes it) and its projector into the text model, over the Backend:
//   features (gemma4_features.h) [frames, 128]
//   -> SSCP: conv 3x3/2 (1 -> c0), LayerNorm, ReLU, conv 3x3/2 (c0 -> c1), LayerNorm, ReLU,
//      flatten (frequency, channel) -> Linear to n_embd                      [tokens, n_embd]
//   -> conformer layers: FFN/2, local attention (window 12, relative position keys, per-dim query
//      scale, softcap 50), light conv (GLU, causal depthwise conv k=5, RMSNorm, SiLU), FFN/2, RMSNorm
//   -> output_proj (+ bias)                                                   [tokens, out_dim]
//   -> embedder: RMSNorm without scale, Linear                                [tokens, proj_dim]
// The reference is transformers' Gemma4AudioModel + Gemma4MultimodalEmbedder (modeling_gemma4.py);
// docs/AUDIO.md has the checks against it and against llama.cpp's libmtmd.
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "models/blocks.h"
#include "models/clipped_linear.h"

namespace cactus {

class GgufFile;
class WeightLoader;

struct Gemma4AudioHParams {
    size_t n_embd = 0;       // clip.audio.embedding_length (1024 in E2B)
    size_t n_layer = 0;      // clip.audio.block_count
    size_t n_head = 0;       // clip.audio.attention.head_count
    size_t n_mels = 128;     // clip.audio.num_mel_bins
    size_t proj_dim = 0;     // clip.audio.projection_dim (the text model's n_embd)
    size_t out_dim = 0;      // output_proj's width (a.pre_encode.out.weight rows; 1536 in E2B)
    size_t c0 = 0, c1 = 0;   // SSCP channels (a.conv1d.{0,1}.weight)
    size_t conv_kernel = 0;  // the light conv's depthwise taps (a.blk.N.conv_dw.weight)
    float eps = 1e-6f;       // clip.audio.attention.layer_norm_epsilon
    size_t head_dim() const { return n_embd / n_head; }
};

class AudioEncoder {
public:
    static constexpr size_t kSampleRate = 16000, kMaxSamples = 480000;  // 30 s
    // Chunked local attention: each frame sees itself and the 11 before it (attention_context_left
    // 13 - 1 positions back, the chunk's own causal span); llama.cpp and transformers hard-code it too.
    static constexpr size_t kAttentionWindow = 12;
    static constexpr float kSoftcap = 50.0f;
    // Tokens per SSCP chunk (the convolutions run over time in pieces: bounded feature maps).
    static constexpr size_t kSscpChunk = 32;

    // `mmproj` must outlive the encoder. Throws cactus::Error naming the key or tensor.
    AudioEncoder(const GgufFile& mmproj, const BackendOptions& options);
    ~AudioEncoder();

    const Gemma4AudioHParams& hparams() const { return hp_; }
    // The backend it runs on: "cpu", "cuda:0", ...
    const char* device() const { return backend_->name(); }
    size_t proj_dim() const { return hp_.proj_dim; }
    // Soft tokens for n samples (25 per second, <= 750).
    size_t tokens(size_t n_samples) const;
    // samples: 16 kHz mono, 1 <= n <= kMaxSamples, finite -> [tokens(n), proj_dim] into *out.
    void encode(const float* samples, size_t n, std::vector<float>* out);
    // From features [n_frames, n_mels]: the embedder's rows [tokens, proj_dim] into *out and, when
    // tower is set, the tower's output before the embedder [tokens, out_dim].
    void encode_features(const float* mel, size_t n_frames, std::vector<float>* out,
                         std::vector<float>* tower = nullptr);

private:
    struct Ffn;
    struct Layer;
    struct Acts;
    void load_weights();
    ClippedLinear clipped(const std::string& name, size_t n_in, size_t n_out);
    Tensor upload_vector(const std::vector<float>& host);
    Tensor relative_keys(const Tensor& w_rel);
    void reserve(size_t n_frames);
    void sscp(size_t n_frames);
    void sscp_chunk(size_t n_frames, size_t a, size_t b);
    void linear(const Tensor& y, const ClippedLinear& l, const Tensor& x);
    void ffn(const Ffn& f, size_t n);
    void attention(const Layer& L, size_t n);
    void light_conv(const Layer& L, size_t n);

    const GgufFile& file_;
    Gemma4AudioHParams hp_;
    std::unique_ptr<Backend> backend_;
    Blocks nn_;
    std::unique_ptr<WeightLoader> weights_;
    std::vector<std::unique_ptr<Buffer>> weight_buffers_;  // q scales and relative keys
    // weights
    Tensor conv0_w_, conv1_w_;        // [c0, 9], [c1, c0 * 9]
    Tensor conv0_norm_, conv1_norm_;  // [c0], [c1]
    Tensor input_proj_;               // [n_embd, c1 * n_mels / 4]
    Tensor out_proj_, out_proj_b_;    // [out_dim, n_embd], [out_dim]
    Tensor embed_proj_;               // [proj_dim, out_dim]
    std::vector<Layer> layers_;
    std::unique_ptr<Acts> acts_;
};

bool mmproj_has_audio(const GgufFile& mmproj);  // clip.has_audio_encoder

}  // namespace cactus
