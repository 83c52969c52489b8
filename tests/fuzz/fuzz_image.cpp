// libFuzzer target: the image decoder (src/media/image.cpp over stb_image) on arbitrary
// bytes. Every input must either decode to a picture of the size its header declares or throw
// cactus::Error; memory stays under the decoder's limits (small limits here keep runs fast).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "media/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    cactus::ImageLimits limits;
    limits.max_file_bytes = size_t(1) << 20;
    limits.max_side = 4096;
    limits.max_pixels = size_t(1) << 22;
    try {
        const cactus::Image img = cactus::decode_image(data, size, "<fuzz>", limits);
        if (img.rgb.size() != img.width * img.height * 3) __builtin_trap();
        if (img.width > limits.max_side || img.height > limits.max_side) __builtin_trap();
    } catch (const cactus::Error&) {
    }
    return 0;
}
