#pragma once
// Small encoded images for the decoder tests and the fuzzer's seed corpus: valid PNG/JPEG/BMP
// (stb_image_write), GIF (a tiny LZW writer) and raw PNG chunks for hand-made hostile files.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace image_samples {

using Bytes = std::vector<uint8_t>;

// A deterministic RGB test pattern [h, w, 3].
Bytes pattern(int w, int h);
Bytes png(int w, int h, int comp, const Bytes& pixels);
Bytes jpeg(int w, int h, const Bytes& rgb, int quality);
Bytes bmp(int w, int h, const Bytes& rgb);
// GIF with a 4-colour global palette; indices [h, w] in 0..3.
Bytes gif(int w, int h, const Bytes& indices);
const uint8_t* gif_palette();  // [4, 3]

// PNG built from chunks: signature + IHDR(w, h, depth, ctype) + IDAT(zlib of raw) + IEND.
Bytes png_raw(uint32_t w, uint32_t h, uint8_t depth, uint8_t ctype, const Bytes& raw_scanlines);
Bytes zlib(const Bytes& data);
void put_be32(Bytes& b, uint32_t v);
Bytes chunk(const char type[4], const Bytes& payload);

}  // namespace image_samples
