#pragma once
// Image preprocessing as the reference processors do it: Pillow's resampling (Image.resize with
// BILINEAR, BICUBIC or LANCZOS: separable fixed-point filters, horizontal pass then vertical, as
// transformers' image processors call it), crops, and normalisation into channel planes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "media/image.h"

namespace cactus {

enum class ResizeFilter { BILINEAR, BICUBIC, LANCZOS };

// Pillow-exact resize of 8-bit RGB (equal to PIL.Image.resize((w, h), filter) on an RGB image).
Image resize_image(const Image& src, size_t width, size_t height, ResizeFilter filter);
// torch's antialiased resize of a uint8 image (torchvision.transforms.v2.functional.resize on a uint8
// tensor with antialias=True, as transformers' torchvision image processors call it): Pillow's
// windows and weights, but int16 weights with as many fractional bits as fit (< 22) and always the
// horizontal pass first; differs from Pillow by +-1 level on some pixels.
Image resize_image_torch(const Image& src, size_t width, size_t height, ResizeFilter filter);
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

// Gemma 3: the image stretched to side x side (aspect not kept) with Pillow's bilinear filter, as
// transformers' Gemma3ImageProcessor does (llama.cpp's libmtmd letterboxes instead: docs/VISION.md).
Image gemma3_image(const Image& img, size_t side);

// Gemma 4 (transformers Gemma4ImageProcessor): the image resized, aspect kept, to the largest size
// with both sides multiples of 48 (patch 16 x pool 3) and at most max_soft_tokens * 9 patches
// (get_aspect_ratio_preserving_size; a side that rounds to 0 becomes 48 and the other
// floor(ratio) * 48, at most the budget's longest side), with torch's uint8 antialiased bicubic
// resize (resize_image_torch); an image already at that size is kept. Throws for budgets other than
// 70, 140, 280, 560, 1120 and for images that give no valid size.
std::pair<size_t, size_t> gemma4_image_size(size_t width, size_t height, size_t max_soft_tokens);
Image gemma4_image(const Image& img, size_t max_soft_tokens);
// Channel planes [3, height * width] of pixel * (1 / 255) in float (Gemma 4: no mean / std).
std::vector<float> gemma4_planes(const Image& img);

// LFM2-VL (transformers Lfm2VlImageProcessor; llama.cpp mtmd_image_preprocessor_lfm2): sizes are
// multiples of unit = patch * downsample pixels. An image that fits (rounded to units, at most
// max_tokens * unit^2 * 2 pixels) becomes one part, smart-resized (aspect kept, between min_tokens
// and max_tokens units of area); a larger one is stretched to a grid of 512-px tiles (2..10 tiles,
// the grid whose aspect ratio is closest) plus the smart-resized thumbnail. Bilinear throughout,
// torch's uint8 antialiased resize (resize_image_torch: transformers 5 processes LFM2-VL images
// with torchvision).
struct Lfm2Config {
    size_t patch = 16;
    size_t downsample = 2;
    size_t min_tokens = 64;
    size_t max_tokens = 256;
    size_t tile = 512;
    size_t min_tiles = 2;
    size_t max_tiles = 10;
    double max_pixels_tolerance = 2.0;
};
// (width, height) of the single image or thumbnail (smart_resize; Python's round, half to even).
std::pair<size_t, size_t> lfm2_smart_size(size_t width, size_t height, const Lfm2Config& c);
// True when the image is split into tiles (_is_image_too_large).
bool lfm2_needs_tiles(size_t width, size_t height, const Lfm2Config& c);
// (columns, rows) of the tile grid (find_closest_aspect_ratio over the min..max tile grids).
std::pair<size_t, size_t> lfm2_grid(size_t width, size_t height, const Lfm2Config& c);
// overview: the single image or the thumbnail; tiles row-major (grid 0 x 0 for a single image).
TiledImage lfm2_tiles(const Image& img, const Lfm2Config& c);

// One piece of an image's prompt: marker text (special tokens, parsed as such), or the embeddings
// of part `part` (0 = the global image, 1 + y * grid_x + x = tile (y, x)).
struct LayoutPiece {
    std::string text;
    int part = -1;  // -1: text
};
// Idefics3's prompt for a tiled image (transformers processing_idefics3 and llama.cpp agree):
//   per tile "<fake_token_around_image><row_Y_col_X>" + tile, "\n" after each row but the last,
//   then "\n\n<fake_token_around_image><global-img>" + global image + "<fake_token_around_image>".
// A 1x1 grid is no split (transformers): "<fake_token_around_image><global-img>" + global + end.
std::vector<LayoutPiece> idefics3_layout(size_t grid_x, size_t grid_y);
// LFM2-VL's prompt (transformers Lfm2VlProcessor and llama.cpp agree): "<|image_start|>", per tile
// "<|img_row_Y_col_X|>" + tile, then "<|img_thumbnail|>" + thumbnail, "<|image_end|>"; a single image
// (grid 0 x 0) is "<|image_start|>" + image + "<|image_end|>". No newlines.
std::vector<LayoutPiece> lfm2_layout(size_t grid_x, size_t grid_y);

}  // namespace cactus
