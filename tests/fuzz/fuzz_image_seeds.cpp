// Seed corpus for fuzz_image: fuzz_image_seeds <dir> writes small valid PNG (grey, RGB, RGBA),
// JPEG, BMP and GIF files.
#include <cstdio>
#include <string>

#include "media/image_samples.h"

namespace is = image_samples;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const is::Bytes rgb = is::pattern(9, 6);
    is::Bytes grey(9 * 6), rgba(9 * 6 * 4);
    for (size_t i = 0; i < grey.size(); ++i) grey[i] = uint8_t(i * 5);
    for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = uint8_t(i * 3);
    is::Bytes idx(7 * 4);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = uint8_t(i % 4);
    const struct {
        const char* name;
        is::Bytes bytes;
    } seeds[] = {
        {"grey.png", is::png(9, 6, 1, grey)},
        {"rgb.png", is::png(9, 6, 3, rgb)},
        {"rgba.png", is::png(9, 6, 4, rgba)},
        {"q90.jpg", is::jpeg(9, 6, rgb, 90)},
        {"q20.jpg", is::jpeg(17, 11, is::pattern(17, 11), 20)},
        {"rgb.bmp", is::bmp(9, 6, rgb)},
        {"pal.gif", is::gif(7, 4, idx)},
    };
    for (const auto& s : seeds) {
        FILE* f = std::fopen((dir + "/" + s.name).c_str(), "wb");
        if (!f) {
            std::perror(s.name);
            return 1;
        }
        std::fwrite(s.bytes.data(), 1, s.bytes.size(), f);
        std::fclose(f);
    }
    return 0;
}
