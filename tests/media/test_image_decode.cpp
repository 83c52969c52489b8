// Image decoding: valid files of each format decode to the expected pixels; a corpus of hostile
// files (each must throw cactus::Error naming the file and the defect or limit); every truncation
// of a valid file of each format is refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "media/image.h"
#include "media/image_samples.h"

namespace is = image_samples;
using is::Bytes;

namespace {

const char* kName = "sample.img";

std::string decode_error(const Bytes& b, const cactus::ImageLimits& limits = cactus::ImageLimits()) {
    try {
        cactus::decode_image(b.data(), b.size(), kName, limits);
    } catch (const cactus::Error& e) {
        return e.what();
    }
    return "";
}

size_t find(const Bytes& b, std::initializer_list<uint8_t> pat) {
    const Bytes p(pat);
    for (size_t i = 0; i + p.size() <= b.size(); ++i)
        if (std::equal(p.begin(), p.end(), b.begin() + long(i))) return i;
    return SIZE_MAX;
}

void set_be16(Bytes& b, size_t at, uint16_t v) {
    b[at] = uint8_t(v >> 8);
    b[at + 1] = uint8_t(v);
}
void set_be32(Bytes& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = uint8_t(v >> (24 - 8 * i));
}
void set_le32(Bytes& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = uint8_t(v >> (8 * i));
}
void set_le16(Bytes& b, size_t at, uint16_t v) {
    b[at] = uint8_t(v);
    b[at + 1] = uint8_t(v >> 8);
}

Bytes valid_png() { return is::png(13, 7, 3, is::pattern(13, 7)); }
Bytes valid_jpeg() { return is::jpeg(24, 16, is::pattern(24, 16), 90); }
Bytes valid_bmp() { return is::bmp(5, 3, is::pattern(5, 3)); }
Bytes gif_indices(int w, int h) {
    Bytes idx(size_t(w) * h);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = uint8_t((i * 7 / 3) % 4);
    return idx;
}
Bytes valid_gif() { return is::gif(6, 5, gif_indices(6, 5)); }

// A 16x16 grey PNG whose IDAT inflates to 8 MiB instead of the 16 * 17 bytes its rows need.
Bytes png_bomb() { return is::png_raw(16, 16, 8, 0, Bytes(size_t(8) << 20, 0)); }

size_t jpeg_sof(const Bytes& b) { return find(b, {0xFF, 0xC0}); }

struct Case {
    const char* name;
    std::function<Bytes()> make;
    std::vector<const char*> parts;  // each must appear in the message
    cactus::ImageLimits limits = cactus::ImageLimits();
};

std::vector<Case> corpus() {
    std::vector<Case> c;
    c.push_back({"empty", [] { return Bytes(); }, {"empty file"}});
    c.push_back({"text",
                 [] {
                     const std::string s = "hello, not an image\n";
                     return Bytes(s.begin(), s.end());
                 },
                 {"not a PNG, JPEG, BMP or GIF"}});
    c.push_back({"gguf", [] { return Bytes{'G', 'G', 'U', 'F', 3, 0, 0, 0}; }, {"unknown signature"}});
    c.push_back({"webp",
                 [] {
                     const std::string s = "RIFF\x10\0\0\0WEBPVP8 ";
                     return Bytes(s.begin(), s.end());
                 },
                 {"unknown signature"}});
    c.push_back({"png_signature_only",
                 [] {
                     const Bytes png = valid_png();  // one vector: begin() of two temporaries is no range
                     return Bytes(png.begin(), png.begin() + 8);
                 },
                 {"truncated PNG"}});
    c.push_back({"png_half",
                 [] {
                     Bytes b = valid_png();
                     b.resize(b.size() / 2);
                     return b;
                 },
                 {"truncated PNG"}});
    c.push_back({"png_no_iend",
                 [] {
                     Bytes b = valid_png();
                     b.resize(b.size() - 12);
                     return b;
                 },
                 {"truncated PNG", "IEND"}});
    c.push_back({"png_zero_width",
                 [] {
                     Bytes b = valid_png();
                     set_be32(b, 16, 0);
                     return b;
                 },
                 {"PNG"}});
    c.push_back({"png_too_wide",
                 [] {
                     Bytes b = valid_png();
                     set_be32(b, 16, 100000);
                     return b;
                 },
                 {"PNG"}});
    c.push_back({"png_over_side_limit",
                 [] { return is::png_raw(20000, 2, 8, 0, Bytes(2 * 20001, 0)); },
                 {"20000x2", "limit of 16384 pixels per side"}});
    c.push_back({"png_over_pixel_limit",
                 [] { return is::png_raw(16000, 16000, 8, 0, Bytes(100, 0)); },
                 {"16000x16000", "over the limit of 40000000"}});
    c.push_back({"png_decompression_bomb", png_bomb, {"decompression bomb", "16x16"}});
    c.push_back({"png_corrupt_idat",
                 [] {
                     Bytes b = valid_png();
                     const size_t at = find(b, {'I', 'D', 'A', 'T'});
                     for (size_t i = at + 6; i < at + 40 && i + 12 < b.size(); ++i) b[i] ^= 0x5A;
                     return b;
                 },
                 {"corrupt PNG"}});
    c.push_back({"png_bad_colour_type",
                 [] {
                     Bytes b = valid_png();
                     b[25] = 7;
                     return b;
                 },
                 {"PNG"}});
    c.push_back({"png_bad_bit_depth",
                 [] {
                     Bytes b = valid_png();
                     b[24] = 3;
                     return b;
                 },
                 {"PNG"}});
    c.push_back({"png_missing_idat",
                 [] {
                     Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
                     Bytes ihdr;
                     is::put_be32(ihdr, 4);
                     is::put_be32(ihdr, 4);
                     ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
                     for (const Bytes& ch : {is::chunk("IHDR", ihdr), is::chunk("IEND", {})})
                         b.insert(b.end(), ch.begin(), ch.end());
                     return b;
                 },
                 {"PNG"}});
    c.push_back({"jpeg_soi_only", [] { return Bytes{0xFF, 0xD8, 0xFF}; }, {"truncated JPEG"}});
    c.push_back({"jpeg_half",
                 [] {
                     Bytes b = valid_jpeg();
                     b.resize(b.size() / 2);
                     return b;
                 },
                 {"truncated JPEG"}});
    c.push_back({"jpeg_no_eoi",
                 [] {
                     Bytes b = valid_jpeg();
                     b.resize(b.size() - 2);
                     return b;
                 },
                 {"truncated JPEG", "end-of-image"}});
    c.push_back({"jpeg_zero_height",
                 [] {
                     Bytes b = valid_jpeg();
                     set_be16(b, jpeg_sof(b) + 5, 0);
                     return b;
                 },
                 {"JPEG"}});
    c.push_back({"jpeg_over_side_limit",
                 [] {
                     Bytes b = valid_jpeg();
                     set_be16(b, jpeg_sof(b) + 7, 30000);
                     return b;
                 },
                 {"JPEG", "30000"}});
    c.push_back({"jpeg_bad_components",
                 [] {
                     Bytes b = valid_jpeg();
                     b[jpeg_sof(b) + 9] = 9;
                     return b;
                 },
                 {"JPEG"}});
    c.push_back({"jpeg_bad_huffman",
                 [] {
                     Bytes b = valid_jpeg();
                     const size_t dht = find(b, {0xFF, 0xC4});
                     for (size_t i = dht + 5; i < dht + 21; ++i) b[i] = 0xFF;  // code counts overflow
                     return b;
                 },
                 {"JPEG"}});
    c.push_back({"jpeg_no_huffman_tables",
                 [] {  // stb 2.27 reads undefined tables (fuzz_image crash)
                     Bytes b = valid_jpeg();
                     for (size_t at = find(b, {0xFF, 0xC4}); at != SIZE_MAX; at = find(b, {0xFF, 0xC4}))
                         b.erase(b.begin() + long(at), b.begin() + long(at + 2 + ((b[at + 2] << 8) | b[at + 3])));
                     return b;
                 },
                 {"undefined Huffman table"}});
    c.push_back({"jpeg_huffman_past_segment",
                 [] {  // a table's counts read past its segment
                     Bytes b = valid_jpeg();
                     const size_t dht = find(b, {0xFF, 0xC4});
                     set_be16(b, dht + 2, uint16_t(((b[dht + 2] << 8) | b[dht + 3]) + 3));
                     return b;
                 },
                 {"JPEG"}});
    c.push_back({"bmp_header_only",
                 [] {
                     Bytes b = valid_bmp();
                     b.resize(20);
                     return b;
                 },
                 {"truncated BMP"}});
    c.push_back({"bmp_truncated_pixels",
                 [] {
                     Bytes b = valid_bmp();
                     b.resize(b.size() - 4);
                     return b;
                 },
                 {"truncated BMP", "pixel array"}});
    c.push_back({"bmp_huge",
                 [] {
                     Bytes b = valid_bmp();
                     set_le32(b, 18, 1u << 30);
                     set_le32(b, 22, 1u << 30);
                     return b;
                 },
                 {"BMP"}});
    c.push_back({"bmp_bad_bpp",
                 [] {
                     Bytes b = valid_bmp();
                     set_le16(b, 28, 7);
                     return b;
                 },
                 {"BMP"}});
    c.push_back({"bmp_rle",
                 [] {
                     Bytes b = valid_bmp();
                     set_le32(b, 30, 1);
                     return b;
                 },
                 {"BMP"}});
    c.push_back({"gif_signature_only",
                 [] {
                     const std::string s = "GIF89a";
                     return Bytes(s.begin(), s.end());
                 },
                 {"truncated GIF"}});
    c.push_back({"gif_no_trailer",
                 [] {
                     Bytes b = valid_gif();
                     b.pop_back();
                     return b;
                 },
                 {"truncated GIF", "0x3B"}});
    c.push_back({"gif_half",
                 [] {
                     Bytes b = valid_gif();
                     b.resize(b.size() / 2);
                     b.push_back(0x3B);
                     return b;
                 },
                 {"GIF"}});
    c.push_back({"gif_over_limit",
                 [] {
                     Bytes b = valid_gif();
                     set_le16(b, 6, 65535);
                     set_le16(b, 8, 65535);
                     return b;
                 },
                 {"GIF", "65535x65535"}});
    c.push_back({"gif_no_image",
                 [] {
                     Bytes b = valid_gif();
                     b.resize(13 + 12);
                     b.push_back(0x3B);
                     return b;
                 },
                 {"GIF"}});
    cactus::ImageLimits small;
    small.max_file_bytes = 50;
    c.push_back({"over_file_limit", valid_png, {"bytes, over the limit of 50"}, small});
    cactus::ImageLimits tiny_side;
    tiny_side.max_side = 8;
    c.push_back({"over_custom_side_limit", valid_png, {"13x7", "limit of 8 pixels per side"}, tiny_side});
    return c;
}

}  // namespace

TEST(ImageDecode, PngRoundTrip) {
    const Bytes px = is::pattern(13, 7);
    const cactus::Image img = cactus::decode_image(valid_png().data(), valid_png().size(), kName);
    ASSERT_EQ(img.width, 13u);
    ASSERT_EQ(img.height, 7u);
    EXPECT_EQ(img.rgb, px);
}

TEST(ImageDecode, GreyAndAlphaPngBecomeRgb) {
    Bytes grey = {0, 128, 255, 7};
    const Bytes g = is::png(2, 2, 1, grey);
    const cactus::Image img = cactus::decode_image(g.data(), g.size(), kName);
    ASSERT_EQ(img.rgb.size(), 12u);
    for (size_t i = 0; i < 4; ++i)
        for (size_t c = 0; c < 3; ++c) EXPECT_EQ(img.rgb[i * 3 + c], grey[i]);
    Bytes rgba = {10, 20, 30, 0, 40, 50, 60, 255};
    const Bytes a = is::png(2, 1, 4, rgba);
    const cactus::Image ia = cactus::decode_image(a.data(), a.size(), kName);
    EXPECT_EQ(ia.rgb, (Bytes{10, 20, 30, 40, 50, 60}));  // alpha dropped, colour kept
}

TEST(ImageDecode, BmpRoundTrip) {
    const cactus::Image img = cactus::decode_image(valid_bmp().data(), valid_bmp().size(), kName);
    ASSERT_EQ(img.width, 5u);
    ASSERT_EQ(img.height, 3u);
    EXPECT_EQ(img.rgb, is::pattern(5, 3));
}

TEST(ImageDecode, JpegCloseToSource) {
    const Bytes px = is::pattern(24, 16);
    const cactus::Image img = cactus::decode_image(valid_jpeg().data(), valid_jpeg().size(), kName);
    ASSERT_EQ(img.width, 24u);
    ASSERT_EQ(img.height, 16u);
    double err = 0;
    for (size_t i = 0; i < px.size(); ++i) err += std::abs(int(px[i]) - int(img.rgb[i]));
    EXPECT_LT(err / double(px.size()), 8.0);
}

TEST(ImageDecode, GifFirstFramePalette) {
    const Bytes idx = gif_indices(6, 5);
    const Bytes g = valid_gif();
    const cactus::Image img = cactus::decode_image(g.data(), g.size(), kName);
    ASSERT_EQ(img.width, 6u);
    ASSERT_EQ(img.height, 5u);
    for (size_t i = 0; i < idx.size(); ++i)
        for (size_t c = 0; c < 3; ++c) ASSERT_EQ(img.rgb[i * 3 + c], is::gif_palette()[idx[i] * 3 + c]) << i;
}

TEST(ImageDecode, HostileCorpus) {
    const std::vector<Case> cases = corpus();
    EXPECT_GE(cases.size(), 20u);
    for (const Case& c : cases) {
        const std::string msg = decode_error(c.make(), c.limits);
        ASSERT_FALSE(msg.empty()) << c.name << " was accepted";
        EXPECT_NE(msg.find(kName), std::string::npos) << c.name << ": " << msg;
        for (const char* part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << c.name << ": " << msg;
    }
}

TEST(ImageDecode, EveryTruncationRefused) {
    for (const Bytes& b : {valid_png(), valid_jpeg(), valid_bmp(), valid_gif()}) {
        ASSERT_TRUE(decode_error(b).empty());
        for (size_t n = 0; n < b.size(); ++n) {
            const Bytes cut(b.begin(), b.begin() + long(n));
            ASSERT_FALSE(decode_error(cut).empty()) << "prefix of " << n << " of " << b.size() << " bytes accepted";
        }
    }
}

TEST(ImageDecode, ByteMutationsNeverCrash) {
    // Each mutated file either decodes to the header's size or throws cactus::Error.
    for (const Bytes& b : {valid_png(), valid_jpeg(), valid_bmp(), valid_gif()}) {
        for (size_t i = 0; i < b.size(); ++i) {
            Bytes m = b;
            m[i] ^= uint8_t(0x80 | (i & 0x7F));
            try {
                const cactus::Image img = cactus::decode_image(m.data(), m.size(), kName);
                EXPECT_EQ(img.rgb.size(), img.width * img.height * 3);
            } catch (const cactus::Error&) {
            }
        }
    }
}

TEST(ImageDecode, FileErrorsNameThePath) {
    const std::string missing = "/nonexistent/dir/photo.png";
    try {
        cactus::load_image(missing);
        FAIL() << "missing file accepted";
    } catch (const cactus::Error& e) {
        EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
    EXPECT_THROW(cactus::load_image("/"), cactus::Error);
    const std::string path = testing::TempDir() + "/cactus_image_test.png";
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    const Bytes b = valid_png();
    std::fwrite(b.data(), 1, b.size(), f);
    std::fclose(f);
    EXPECT_EQ(cactus::load_image(path).rgb, is::pattern(13, 7));
    cactus::ImageLimits small;
    small.max_file_bytes = 10;
    try {
        cactus::load_image(path, small);
        FAIL() << "file over the limit accepted";
    } catch (const cactus::Error& e) {
        EXPECT_NE(std::string(e.what()).find("over the limit of 10"), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
}
