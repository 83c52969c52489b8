#pragma once
// Image input for vision models: decodes PNG, JPEG, BMP and GIF (first frame) into 8-bit RGB with
// stb_image (Debian libstb-dev), behind limits checked before any pixel is decoded. Hostile files
// (empty, not an image, truncated, absurd dimensions, decompression bombs) throw cactus::Error
// naming the file and the limit or the defect; nothing is decoded past the limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cactus {

struct ImageLimits {
    size_t max_file_bytes = size_t(64) << 20;  // encoded size
    size_t max_side = 16384;                   // width and height, pixels
    size_t max_pixels = 40000000;              // width * height (40 Mpx: 120 MB of RGB)
};

struct Image {
    size_t width = 0;
    size_t height = 0;
    std::vector<uint8_t> rgb;  // [height, width, 3], row-major, sRGB bytes as stored
};

// Decodes an encoded image held in memory; `name` (a path or "<bytes>") appears in every error.
Image decode_image(const uint8_t* data, size_t bytes, const std::string& name,
                   const ImageLimits& limits = ImageLimits());
// Reads and decodes a file (the size limit is checked before reading).
Image load_image(const std::string& path, const ImageLimits& limits = ImageLimits());
// Reads a file's bytes with the size limit (for callers that hash or keep the bytes).
std::vector<uint8_t> read_image_file(const std::string& path, const ImageLimits& limits = ImageLimits());

}  // namespace cactus
