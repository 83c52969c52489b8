#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace cactus {
namespace byte_level {

namespace {
struct ByteMaps {
    std::array<std::string, 256> byte_to_text;
    std::array<int, 324> cp_to_byte;  // the images are all below U+0144

    ByteMaps() {
        cp_to_byte.fill(-1);
        std::array<bool, 256> printable{};
        for (int b = 0x21; b <= 0x7E; ++b) printable[b] = true;
        for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
        for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
        int next = 0;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = printable[b] ? static_cast<uint32_t>(b) : 256u + next++;
            byte_to_text[b] = utf8::encode(cp);
            cp_to_byte[cp] = b;
        }
    }
};
const ByteMaps& byte_maps() {
    static const ByteMaps maps;
    return maps;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_maps().byte_to_text[byte]; }

int unicode_to_byte(uint32_t cp) {
    const auto& maps = byte_maps();
    return cp < maps.cp_to_byte.size() ? maps.cp_to_byte[cp] : -1;
}

}  // namespace byte_level
}  // namespace cactus
