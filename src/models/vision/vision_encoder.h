#pragma once
// Vision encoders read from an mmproj GGUF as llama.cpp's converter writes it (keys clip.*, tensors
// v.* and mm.*): a ViT (SigLIP: patch convolution, learned positions, pre-norm blocks with GELU,
// post-norm) and a projector per family, over the backend's ops. Non-causal, no KV cache: every
// patch attends to every patch of its image (attention_dense).
//
// Families (clip.projector_type):
//  - idefics3 (SmolVLM): SigLIP at image_size, pixel shuffle by scale_factor, linear mm.model.fc.
//  - gemma3 (Gemma 3): SigLIP at image_size (896), scale_factor x scale_factor average pool (4 by
//    default), soft-embedding RMS norm, input projection (gemma3_projector.h).
//  - lfm2 (LFM2-VL): SigLIP2 NaFlex at the image's own size (the position grid resized), pixel
//    unshuffle, layer norm, 2-layer GELU MLP (lfm2_projector.h).
//  - gemma4v (Gemma 4): its own tower at the image's own size (gemma4_vision.h).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "models/blocks.h"
#include "models/vision/preprocess.h"

namespace cactus {

class GgufFile;
class WeightLoader;
class Gemma3Projector;
class Lfm2Projector;
class Gemma4Vision;

struct VisionHParams {
    std::string projector;  // clip.projector_type
    size_t image_size = 0;  // clip.vision.image_size (side of a tile, pixels)
    size_t patch_size = 0;  // clip.vision.patch_size
    size_t n_embd = 0;      // clip.vision.embedding_length
    size_t n_ff = 0;        // clip.vision.feed_forward_length
    size_t n_layer = 0;     // clip.vision.block_count
    size_t n_head = 0;      // clip.vision.attention.head_count
    size_t proj_dim = 0;    // clip.vision.projection_dim (the text model's n_embd)
    float eps = 1e-6f;      // clip.vision.attention.layer_norm_epsilon
    float mean[3] = {0.5f, 0.5f, 0.5f};
    float std[3] = {0.5f, 0.5f, 0.5f};
    size_t scale_factor = 1;  // clip.vision.projector.scale_factor (pixel shuffle / pooling; gemma3: 4 if absent)
    size_t longest_edge = 0;  // clip.vision.preproc_image_size (idefics3)
    size_t min_tokens = 0;    // lfm2: image tokens of a resized image (64..256, as llama.cpp and the
    size_t max_tokens = 0;    // processor config of the released models)
    Activation act = Activation::GELU_TANH;
};

// One image ready for the encoder: normalised channel planes [3, height * width].
struct EncoderInput {
    size_t width = 0;
    size_t height = 0;
    std::vector<float> planes;
};

class VisionEncoder {
public:
    // The most patches one dynamic-size input may have (lfm2's preprocessing gives <= 1,024 for the
    // released limits; extreme aspect ratios a few thousand).
    static constexpr size_t kMaxDynamicPatches = 16384;
    // `mmproj` must outlive the encoder. Throws cactus::Error naming the key or tensor.
    VisionEncoder(const GgufFile& mmproj, const BackendOptions& options);
    ~VisionEncoder();

    const VisionHParams& hparams() const { return hp_; }
    // The backend it runs on: "cpu", "cuda:0", ...
    const char* device() const { return backend_->name(); }
    // True when the encoder takes any size (lfm2: multiples of patch * scale_factor per side) rather
    // than image_size x image_size.
    bool dynamic_size() const { return hp_.projector == "lfm2" || hp_.projector == "gemma4v"; }
    // Output embeddings of one input: [tokens(input), proj_dim] row-major into *out.
    void encode(const EncoderInput& input, std::vector<float>* out);
    size_t tokens(const EncoderInput& input) const;

private:
    struct Layer;
    void load_weights();
    void pixel_shuffle(const std::vector<float>& x, size_t gw, size_t gh, std::vector<float>* out) const;

    const GgufFile& file_;
    VisionHParams hp_;
    std::unique_ptr<Backend> backend_;
    Blocks nn_;
    std::unique_ptr<WeightLoader> weights_;  // owns the F32 vectors
    std::vector<Layer> layers_;
    Tensor patch_w_, patch_b_;  // [n_embd, 3 * p * p], [n_embd]
    Tensor pos_;                // [n_pos, n_embd] F32
    // The same grid in the file (lfm2 resizes it per image).
    const float* pos_host_ = nullptr;
    Tensor post_w_, post_b_;  // [n_embd]
    Tensor fc_;               // idefics3: [proj_dim, n_embd * s * s]
    std::unique_ptr<Gemma3Projector> gemma3_;
    std::unique_ptr<Lfm2Projector> lfm2_;
    std::unique_ptr<Gemma4Vision> gemma4_;
};

VisionHParams read_vision_hparams(const GgufFile& mmproj);

}  // namespace cactus
