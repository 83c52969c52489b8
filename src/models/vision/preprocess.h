#pragma once
// Image preprocessing as the reference processors do it: Pillow's resampling (Image.resize with
// BILINEAR, BICUBIC or LANCZOS: separable fixed-point filters, horizontal pass then vertical, as
// transformers' image processors call it), crops, and normalisation into channel planes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/vision/image.h"

namespace cactus {

enum class ResizeFilter { BILINEAR, BICUBIC, LANCZOS };

// Pillow-exact resize of 8-bit RGB (equal to PIL.Image.resize((w, h), filter) on an RGB image).
Image resize_image(const Image& src, size_t width, size_t height, ResizeFilter filter);
// Rows [y, y + h) and columns [x, x + w) of src.
Image crop_image(const Image& src, size_t x, size_t y, size_t w, size_t h);

// Channel planes [3, height * width] of (pixel / 255 - mean[c]) / std[c] (float arithmetic in
// the reference's order).
std::vector<float> normalize_planes(const Image& img, const float mean[3], const float std[3]);

// Idefics3 / SmolVLM: the image resized (aspect kept) so its longest side is `longest_edge` (odd
// sides rounded up to even), then stretched to a grid of tile x tile tiles; the tiles row-major,
// plus the whole grid resized to one tile (the global image). Lanczos throughout.
struct TiledImage {
    size_t grid_x = 0;  // tiles per row (0 when the image is a single tile: no tiling)
    size_t grid_y = 0;
    std::vector<Image> tiles;  // [grid_y * grid_x], row-major
    Image overview;            // tile x tile
};
TiledImage idefics3_tiles(const Image& img, size_t tile, size_t longest_edge);

}  // namespace cactus
