// Image decoding over stb_image with limits (see image.h).
//
// stb_image trusts its input in three ways we do not: it pads a truncated JPEG, BMP or GIF with
// zeros and returns a picture; it grows the zlib output of a PNG without bound (a few MB of IDAT
// can inflate to GBs: a decompression bomb); and it decodes whatever size the header declares. So
// before stb sees the bytes we check the container (signature, end marker, BMP pixel array inside
// the file), read the declared size with stbi_info and check it against the limits, and during
// decoding every allocation stb makes goes through a guard that refuses more than the declared
// image can need.
#include "media/image.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace cactus {
namespace {

// Allocation guard for stb (thread-local: decoding runs on any thread).
thread_local size_t g_alloc_cap = SIZE_MAX;
thread_local bool g_alloc_refused = false;

void* guarded_malloc(size_t n) {
    if (n > g_alloc_cap) {
        g_alloc_refused = true;
        return nullptr;
    }
    return std::malloc(n);
}
void* guarded_realloc(void* p, size_t n) {
    if (n > g_alloc_cap) {
        g_alloc_refused = true;
        return nullptr;
    }
    return std::realloc(p, n);
}

}  // namespace
}  // namespace cactus

#define STBI_MALLOC(n) ::cactus::guarded_malloc(n)
#define STBI_REALLOC(p, n) ::cactus::guarded_realloc(p, n)
#define STBI_FREE(p) std::free(p)
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

namespace cactus {
namespace {

enum class Format { PNG, JPEG, BMP, GIF };

const char* format_name(Format f) {
    switch (f) {
        case Format::PNG:
            return "PNG";
        case Format::JPEG:
            return "JPEG";
        case Format::BMP:
            return "BMP";
        case Format::GIF:
            return "GIF";
    }
    return "?";
}

bool starts_with(const uint8_t* d, size_t n, const char* sig, size_t k) {
    return n >= k && std::memcmp(d, sig, k) == 0;
}

Format sniff(const uint8_t* d, size_t n, const std::string& name) {
    if (n == 0) fail("decode_image: %s: empty file", name.c_str());
    if (starts_with(d, n, "\x89PNG\r\n\x1a\n", 8)) return Format::PNG;
    if (starts_with(d, n, "\xff\xd8\xff", 3)) return Format::JPEG;
    if (starts_with(d, n, "BM", 2)) return Format::BMP;
    if (starts_with(d, n, "GIF87a", 6) || starts_with(d, n, "GIF89a", 6)) return Format::GIF;
    fail("decode_image: %s: not a PNG, JPEG, BMP or GIF image (unknown signature)", name.c_str());
}

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24); }
uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// A PNG ends with its IEND chunk (length 0, "IEND", CRC).
void check_png_end(const uint8_t* d, size_t n, const std::string& name) {
    static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    if (n < 8 + 25 + 12 || std::memcmp(d + n - 12, iend, 12) != 0)
        fail("decode_image: %s: truncated PNG (no IEND chunk at the end of its %zu bytes)", name.c_str(), n);
}

// A JPEG's last scan (after the last SOS marker FF DA) ends with EOI (FF D9). Entropy-coded bytes
// stuff every FF with 00, so neither marker can appear inside scan data.
void check_jpeg_end(const uint8_t* d, size_t n, const std::string& name) {
    size_t last_sos = 0;
    for (size_t i = 2; i + 1 < n; ++i)
        if (d[i] == 0xFF && d[i + 1] == 0xDA) last_sos = i;
    bool eoi = false;
    for (size_t i = last_sos; last_sos > 0 && i + 1 < n && !eoi; ++i) eoi = d[i] == 0xFF && d[i + 1] == 0xD9;
    if (!eoi) fail("decode_image: %s: truncated JPEG (no end-of-image marker after the last scan)", name.c_str());
}

uint16_t be16(const uint8_t* p) { return uint16_t((p[0] << 8) | p[1]); }

// Walks a JPEG's segments: every scan must use Huffman tables defined before it. stb_image 2.27
// (Debian) reads an undefined table's uninitialised bounds and runs off its arrays (found by
// fuzz_image), and writes a table of over 256 codes past its arrays, so such files are refused here. Entropy-coded data is skipped byte by byte.
void check_jpeg_tables(const uint8_t* d, size_t n, const std::string& name) {
    bool defined[2][4] = {};
    bool progressive = false;
    size_t i = 2;
    while (i + 1 < n) {
        if (d[i] != 0xFF) {
            ++i;
            continue;
        }  // entropy-coded bytes
        const uint8_t m = d[i + 1];
        if (m == 0xFF) {
            ++i;
            continue;
        }  // fill byte
        if (m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
            i += 2;
            continue;
        }
        if (m == 0xD9) return;
        if (i + 4 > n) break;
        const size_t len = be16(d + i + 2);
        if (len < 2 || i + 2 + len > n)
            fail("decode_image: %s: corrupt JPEG (segment FF%02X of %zu bytes at offset %zu runs past the end)",
                 name.c_str(), m, len, i);
        const uint8_t* seg = d + i + 4;
        const size_t seg_n = len - 2;
        if (m == 0xC4) {
            for (size_t p = 0; p < seg_n;) {
                if (p + 17 > seg_n) fail("decode_image: %s: corrupt JPEG (short Huffman table)", name.c_str());
                const int tc = seg[p] >> 4, th = seg[p] & 15;
                if (tc > 1 || th > 3)
                    fail("decode_image: %s: corrupt JPEG (Huffman table class %d id %d)", name.c_str(), tc, th);
                size_t count = 0;
                for (int k = 1; k <= 16; ++k) count += seg[p + k];
                // stb 2.27 writes a table of more than 256 codes past its arrays.
                if (count > 256 || p + 17 + count > seg_n)
                    fail("decode_image: %s: corrupt JPEG (Huffman table of %zu codes)", name.c_str(), count);
                defined[tc][th] = true;
                p += 17 + count;
            }
        } else if (m == 0xDA && seg_n >= 1) {
            const size_t ns = seg[0];
            if (seg_n < 1 + 2 * ns + 3) fail("decode_image: %s: corrupt JPEG (short scan header)", name.c_str());
            const uint8_t ss = seg[1 + 2 * ns], ah = seg[3 + 2 * ns] >> 4;
            // Baseline scans decode with both tables; progressive DC scans use the DC table on the
            // first pass only, AC scans the AC table.
            const bool need_dc = ss == 0 && (ah == 0 || !progressive), need_ac = ss != 0 || !progressive;
            for (size_t c = 0; c < ns; ++c) {
                const int td = seg[2 + 2 * c] >> 4, ta = seg[2 + 2 * c] & 15;
                if ((need_dc && (td > 3 || !defined[0][td])) || (need_ac && (ta > 3 || !defined[1][ta])))
                    fail("decode_image: %s: corrupt JPEG (a scan uses an undefined Huffman table)", name.c_str());
            }
        } else if (m == 0xC2) {
            progressive = true;
        }
        i += 2 + len;
    }
}

// A GIF ends with the trailer byte 0x3B.
void check_gif_end(const uint8_t* d, size_t n, const std::string& name) {
    if (n < 14 || d[n - 1] != 0x3B) fail("decode_image: %s: truncated GIF (no trailer byte 0x3B)", name.c_str());
}

// An uncompressed BMP's pixel array (offset, rows padded to 4 bytes) lies inside the file.
void check_bmp_extent(const uint8_t* d, size_t n, const std::string& name) {
    if (n < 30) fail("decode_image: %s: truncated BMP (%zu bytes, header needs 30)", name.c_str(), n);
    const uint32_t offset = le32(d + 10);
    const uint32_t header = le32(d + 14);
    if (header < 40) return;  // OS/2 core header: stb checks what it reads
    if (n < 54) fail("decode_image: %s: truncated BMP (%zu bytes, header needs 54)", name.c_str(), n);
    const int64_t w = int32_t(le32(d + 18));
    const int64_t h = int32_t(le32(d + 22));
    const uint16_t bpp = le16(d + 28);
    const uint32_t compression = le32(d + 30);
    if (compression != 0 && compression != 3 && compression != 6) return;  // stb rejects the rest
    const uint64_t aw = uint64_t(w < 0 ? -w : w), ah = uint64_t(h < 0 ? -h : h);
    if (aw > 1u << 20 || ah > 1u << 20) return;  // the size limits below name it
    const uint64_t stride = (aw * bpp + 31) / 32 * 4;
    if (uint64_t(offset) + stride * ah > n)
        fail("decode_image: %s: truncated BMP (pixel array needs %llu bytes from offset %u, file has %zu)",
             name.c_str(), (unsigned long long)(stride * ah), offset, n);
}

void check_container(Format f, const uint8_t* d, size_t n, const std::string& name) {
    switch (f) {
        case Format::PNG:
            check_png_end(d, n, name);
            break;
        case Format::JPEG:
            check_jpeg_end(d, n, name);
            check_jpeg_tables(d, n, name);
            break;
        case Format::BMP:
            check_bmp_extent(d, n, name);
            break;
        case Format::GIF:
            check_gif_end(d, n, name);
            break;
    }
}

// Clears the guard when decoding ends, however it ends.
struct AllocCap {
    explicit AllocCap(size_t cap) {
        g_alloc_cap = cap;
        g_alloc_refused = false;
    }
    ~AllocCap() { g_alloc_cap = SIZE_MAX; }
};

}  // namespace

Image decode_image(const uint8_t* data, size_t bytes, const std::string& name, const ImageLimits& limits) {
    if (bytes > limits.max_file_bytes)
        fail("decode_image: %s: %zu bytes, over the limit of %zu", name.c_str(), bytes, limits.max_file_bytes);
    const Format format = sniff(data, bytes, name);
    check_container(format, data, bytes, name);
    if (bytes > size_t(INT32_MAX)) fail("decode_image: %s: %zu bytes, over 2 GiB", name.c_str(), bytes);

    int w = 0, h = 0, comp = 0;
    if (!stbi_info_from_memory(data, int(bytes), &w, &h, &comp))
        fail("decode_image: %s: bad %s header (%s)", name.c_str(), format_name(format), stbi_failure_reason());
    if (w <= 0 || h <= 0) fail("decode_image: %s: empty %s image (%dx%d)", name.c_str(), format_name(format), w, h);
    if (size_t(w) > limits.max_side || size_t(h) > limits.max_side)
        fail("decode_image: %s: %s image is %dx%d pixels, over the limit of %zu pixels per side", name.c_str(),
             format_name(format), w, h, limits.max_side);
    const size_t pixels = size_t(w) * size_t(h);
    if (pixels > limits.max_pixels)
        fail("decode_image: %s: %s image is %dx%d = %zu pixels, over the limit of %zu", name.c_str(),
             format_name(format), w, h, pixels, limits.max_pixels);

    // The most any decoder buffer can need: 4 channels of 16 bits for every pixel (PNG rows also
    // carry a filter byte and the zlib output is compared against the expected length), plus slack.
    const size_t cap = pixels * 8 + size_t(h) * 8 + (size_t(1) << 20);
    int ow = 0, oh = 0, ocomp = 0;
    AllocCap guard(cap);
    stbi_uc* pixels_rgb = stbi_load_from_memory(data, int(bytes), &ow, &oh, &ocomp, 3);
    if (!pixels_rgb) {
        if (g_alloc_refused)
            fail("decode_image: %s: %s data expands past %zu bytes for a %dx%d image (decompression bomb?)",
                 name.c_str(), format_name(format), cap, w, h);
        fail("decode_image: %s: corrupt %s data (%s)", name.c_str(), format_name(format), stbi_failure_reason());
    }
    std::unique_ptr<stbi_uc, void (*)(void*)> owned(pixels_rgb, stbi_image_free);
    if (ow != w || oh != h)
        fail("decode_image: %s: %s decoded to %dx%d, header said %dx%d", name.c_str(), format_name(format), ow, oh, w,
             h);
    Image img;
    img.width = size_t(w);
    img.height = size_t(h);
    img.rgb.assign(pixels_rgb, pixels_rgb + pixels * 3);
    return img;
}

std::vector<uint8_t> read_image_file(const std::string& path, const ImageLimits& limits) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) fail("load_image: cannot open %s", path.c_str());
    if (std::fseek(f.get(), 0, SEEK_END) != 0) fail("load_image: %s: cannot seek (not a regular file?)", path.c_str());
    const long size = std::ftell(f.get());
    if (size < 0) fail("load_image: %s: cannot tell its size (not a regular file?)", path.c_str());
    if (size_t(size) > limits.max_file_bytes)
        fail("load_image: %s: %ld bytes, over the limit of %zu", path.c_str(), size, limits.max_file_bytes);
    std::fseek(f.get(), 0, SEEK_SET);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    if (size > 0 && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
        fail("load_image: %s: short read", path.c_str());
    return bytes;
}

Image load_image(const std::string& path, const ImageLimits& limits) {
    const std::vector<uint8_t> bytes = read_image_file(path, limits);
    return decode_image(bytes.data(), bytes.size(), path, limits);
}

}  // namespace cactus
