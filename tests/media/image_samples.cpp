#include "media/image_samples.h"

#include <cstring>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace image_samples {
namespace {

void append(void* ctx, void* data, int size) {
    auto* out = static_cast<Bytes*>(ctx);
    const auto* p = static_cast<const uint8_t*>(data);
    out->insert(out->end(), p, p + size);
}

uint32_t crc32(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

// LSB-first bit packer for GIF LZW codes.
struct BitWriter {
    Bytes bytes;
    uint32_t acc = 0;
    int n = 0;
    void put(uint32_t code, int bits) {
        acc |= code << n;
        n += bits;
        while (n >= 8) {
            bytes.push_back(uint8_t(acc));
            acc >>= 8;
            n -= 8;
        }
    }
    void flush() {
        if (n > 0) bytes.push_back(uint8_t(acc));
        acc = 0;
        n = 0;
    }
};

}  // namespace

Bytes pattern(int w, int h) {
    Bytes p(size_t(w) * h * 3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            uint8_t* px = &p[(size_t(y) * w + x) * 3];
            px[0] = uint8_t(x * 255 / (w > 1 ? w - 1 : 1));
            px[1] = uint8_t(y * 255 / (h > 1 ? h - 1 : 1));
            px[2] = uint8_t((x * 7 + y * 13) & 0xFF);
        }
    return p;
}

Bytes png(int w, int h, int comp, const Bytes& pixels) {
    Bytes out;
    stbi_write_png_to_func(append, &out, w, h, comp, pixels.data(), w * comp);
    return out;
}

Bytes jpeg(int w, int h, const Bytes& rgb, int quality) {
    Bytes out;
    stbi_write_jpg_to_func(append, &out, w, h, 3, rgb.data(), quality);
    return out;
}

Bytes bmp(int w, int h, const Bytes& rgb) {
    Bytes out;
    stbi_write_bmp_to_func(append, &out, w, h, 3, rgb.data());
    return out;
}

const uint8_t* gif_palette() {
    static const uint8_t pal[12] = {0, 0, 0, 255, 0, 0, 0, 255, 0, 20, 40, 250};
    return pal;
}

Bytes gif(int w, int h, const Bytes& indices) {
    Bytes out = {'G', 'I', 'F', '8', '9', 'a'};
    out.push_back(uint8_t(w));
    out.push_back(uint8_t(w >> 8));
    out.push_back(uint8_t(h));
    out.push_back(uint8_t(h >> 8));
    out.push_back(0x81);  // global colour table, 2^(1+1) = 4 entries
    out.push_back(0);
    out.push_back(0);
    out.insert(out.end(), gif_palette(), gif_palette() + 12);
    out.push_back(0x2C);  // image descriptor
    for (int i = 0; i < 4; ++i) out.push_back(0);
    out.push_back(uint8_t(w));
    out.push_back(uint8_t(w >> 8));
    out.push_back(uint8_t(h));
    out.push_back(uint8_t(h >> 8));
    out.push_back(0);
    out.push_back(2);  // LZW minimum code size: clear = 4, end = 5, codes of 3 bits
    // Every pair of literal codes is followed by a clear code, so the table never grows past 3 bits.
    BitWriter bw;
    for (size_t i = 0; i < indices.size(); ++i) {
        if (i % 2 == 0) bw.put(4, 3);
        bw.put(indices[i], 3);
    }
    bw.put(5, 3);
    bw.flush();
    for (size_t i = 0; i < bw.bytes.size(); i += 255) {
        const size_t k = std::min<size_t>(255, bw.bytes.size() - i);
        out.push_back(uint8_t(k));
        out.insert(out.end(), bw.bytes.begin() + long(i), bw.bytes.begin() + long(i + k));
    }
    out.push_back(0);
    out.push_back(0x3B);
    return out;
}

void put_be32(Bytes& b, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

Bytes chunk(const char type[4], const Bytes& payload) {
    Bytes c;
    put_be32(c, uint32_t(payload.size()));
    Bytes body(type, type + 4);
    body.insert(body.end(), payload.begin(), payload.end());
    c.insert(c.end(), body.begin(), body.end());
    put_be32(c, crc32(body.data(), body.size()));
    return c;
}

Bytes zlib(const Bytes& data) {
    int n = 0;
    unsigned char* z = stbi_zlib_compress(const_cast<uint8_t*>(data.data()), int(data.size()), &n, 8);
    Bytes out(z, z + n);
    STBIW_FREE(z);
    return out;
}

Bytes png_raw(uint32_t w, uint32_t h, uint8_t depth, uint8_t ctype, const Bytes& raw_scanlines) {
    Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    Bytes ihdr;
    put_be32(ihdr, w);
    put_be32(ihdr, h);
    ihdr.push_back(depth);
    ihdr.push_back(ctype);
    ihdr.push_back(0);
    ihdr.push_back(0);
    ihdr.push_back(0);
    for (const Bytes& c : {chunk("IHDR", ihdr), chunk("IDAT", zlib(raw_scanlines)), chunk("IEND", {})})
        out.insert(out.end(), c.begin(), c.end());
    return out;
}

}  // namespace image_samples
