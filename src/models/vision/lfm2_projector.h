#pragma once
// LFM2-VL's vision side over the shared SigLIP trunk (llama.cpp clip.cpp PROJECTOR_TYPE_LFM2,
// models/siglip.cpp; transformers Siglip2VisionEmbeddings and Lfm2VlMultiModalProjector):
//  - SigLIP2 NaFlex: the image keeps its aspect ratio (any multiple of patch * downsample pixels per
//    side); the learned position grid (side x side, 16 x 16 in the released files) is resized to the
//    image's patch grid with bilinear interpolation, align_corners=False, antialias=True
//    (resize_position_grid);
//  - projector: pixel unshuffle by clip.vision.projector.scale_factor (2), an optional layer norm
//    (mm.input_norm.{weight,bias}, eps 1e-5: nn.LayerNorm's default), mm.1 (linear + bias), GELU,
//    mm.2 (linear + bias) to the text width. The GELU is the erf form (transformers'
//    projector_hidden_act "gelu"); llama.cpp's ggml_gelu is the tanh form (docs/VISION.md).
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace cactus {

class GgufFile;
class WeightLoader;
struct VisionHParams;

// grid [side * side, d] (row-major, row y then column x) -> out [gh * gw, d]: the grid resized to gh
// rows by gw columns as F.interpolate(mode="bilinear", align_corners=False, antialias=True) does,
// separably (weights along each axis: a triangle of half-width max(scale, 1) in input pixels around
// (o + 0.5) * scale - 0.5, normalised to sum 1).
void resize_position_grid(const float* grid, size_t side, size_t d, size_t gw, size_t gh, std::vector<float>* out);

// x [gh, gw, d] row-major -> out [(gh / s) * (gw / s), d * s * s]: token (Y, X) is the concatenation
// over i, j < s (i outer) of patch (Y * s + i, X * s + j) (llama.cpp build_patch_merge_permute,
// transformers' pixel_unshuffle); throws unless s divides both sides.
void pixel_unshuffle(const float* x, size_t gw, size_t gh, size_t d, size_t s, std::vector<float>* out);

class Lfm2Projector {
public:
    Lfm2Projector(const GgufFile& mmproj, Backend& backend, WeightLoader& weights, const VisionHParams& hp);
    ~Lfm2Projector();
    // patches [gh * gw, n_embd] host rows (after the trunk's post norm) -> out [tokens, proj_dim].
    void project(const std::vector<float>& patches, size_t gw, size_t gh, std::vector<float>* out);

private:
    Backend& be_;
    size_t n_embd_, proj_dim_, s_, hidden_;
    Tensor norm_w_, norm_b_;  // [n_embd * s * s] each, empty when the file has none
    Tensor w1_, b1_;          // [hidden, n_embd * s * s], [hidden]
    Tensor w2_, b2_;          // [proj_dim, hidden], [proj_dim]
};

}  // namespace cactus
