#pragma once
// Gemma 3's multimodal projector over the SigLIP trunk (llama.cpp clip.cpp PROJECTOR_TYPE_GEMMA3,
// transformers Gemma3MultiModalProjector): the patch grid average-pooled k x k (k = patches per side
// / tokens per side, clip.vision.projector.scale_factor, 4 by default), RMS-normed with
// mm.soft_emb_norm.weight (the converter stores 1 + w), then projected to the text width by
// mm.input_projection.weight (stored {proj_dim, n_embd}: x W, not x W^T; transposed at load).
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace cactus {

class GgufFile;
class WeightLoader;
struct VisionHParams;

// x [gh, gw, d] row-major -> out [(gh / k) * (gw / k), d]: the mean of each k x k block of patches,
// blocks row-major (ggml_pool_2d AVG with kernel = stride = k).
void average_pool(const float* x, size_t gw, size_t gh, size_t d, size_t k, std::vector<float>* out);

class Gemma3Projector {
public:
    Gemma3Projector(const GgufFile& mmproj, Backend& backend, WeightLoader& weights, const VisionHParams& hp);
    ~Gemma3Projector();
    // patches [gh * gw, n_embd] host rows (after the trunk's post norm) -> out [tokens, proj_dim].
    void project(const std::vector<float>& patches, size_t gw, size_t gh, std::vector<float>* out);

private:
    Backend& be_;
    size_t n_embd_, proj_dim_, k_;
    float eps_;
    Tensor norm_;  // [n_embd] F32
    Tensor proj_;  // [proj_dim, n_embd] F32 (transposed from the file)
    std::unique_ptr<Buffer> proj_buf_;
};

}  // namespace cactus
