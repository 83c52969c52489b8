#pragma once
// Gemma 4's vision tower and embedder (clip.vision.projector_type gemma4v; transformers
// Gemma4VisionModel + Gemma4MultimodalEmbedder, llama.cpp tools/mtmd/models/gemma4v.cpp):
//   pixels p in [0, 1] -> 2 (p - 0.5) -> 16x16 patch embedding (no bias) + x and y position tables
//   -> pre-norm layers: RMSNorm, q/k/v (clipped linears), q/k RMSNorm with gains, v RMSNorm without,
//      2-D RoPE (theta 100: the first half of each head rotated by the patch's x, the second by its
//      y, NeoX pairs within each half), attention with scale 1, o, post-attention norm, residual;
//      pre-FFN norm, GeGLU (tanh GELU), post-FFN norm, residual
//   -> k x k average pool of the patch grid (k = 3), x sqrt(n_embd), RMSNorm without scale,
//      mm.input_projection to the text width.
// A clipped linear clamps its input and its output to the scalars stored beside its weight
// (.input_min/.input_max/.output_min/.output_max). The images come at their own size (multiples of
// 48 pixels, gemma4_image in preprocess.h), no padding patches: the reference pads to a fixed patch
// count and masks the padding, which leaves the real patches' outputs unchanged.
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "models/blocks.h"
#include "models/clipped_linear.h"

namespace cactus {

class GgufFile;
class WeightLoader;
struct VisionHParams;
struct EncoderInput;

class Gemma4Vision {
public:
    static constexpr size_t kPool = 3;  // clip.cpp hard-codes n_merge 3 for gemma4v
    static constexpr float kRopeTheta = 100.0f;
    // The most patches one image may have (1120 soft tokens, the processor's largest budget).
    static constexpr size_t kMaxPatches = 1120 * kPool * kPool;

    Gemma4Vision(const GgufFile& mmproj, Backend& backend, WeightLoader& weights, const VisionHParams& hp);
    ~Gemma4Vision();
    // in: planes [3, H * W] of pixel / 255 (H, W multiples of patch * 3) -> out [tokens, proj_dim].
    void encode(const EncoderInput& in, std::vector<float>* out);

private:
    struct Layer {
        Tensor ln1, attn_post_norm, ln2, ffn_post_norm;  // [n_embd]
        Tensor q_norm, k_norm;                           // [head_dim]
        ClippedLinear q, k, v, o, gate, up, down;
    };
    struct Activations;
    void check_input(const EncoderInput& in) const;
    void embed_patches(const EncoderInput& in, const Activations& a);
    void attention(const Layer& L, const Activations& a);
    void feed_forward(const Layer& L, const Activations& a);
    // y = clamp(clamp(x, in) W^T, out); xc: scratch [n, n_in].
    void clipped_linear(const Tensor& y, const ClippedLinear& l, const Tensor& x, const Tensor& xc);
    void project(const Tensor& x, size_t gw, size_t gh, std::vector<float>* out);

    const GgufFile& file_;
    Backend& be_;
    WeightLoader& w_;
    Blocks nn_;
    size_t n_embd_, n_head_, head_dim_, n_ff_, patch_, proj_dim_, n_pos_;
    float eps_;
    Tensor patch_w_;  // [n_embd, 3 * p * p] conv kernel
    Tensor pos_;      // [2 * n_pos, n_embd] F32: the x table, then the y table
    Tensor proj_;     // [proj_dim, n_embd]
    std::vector<Layer> layers_;
};

}  // namespace cactus
