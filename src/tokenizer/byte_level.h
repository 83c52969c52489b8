#pragma once
// GPT-2's byte-level mapping (BPE vocabularies): every byte to a printable code point, and back.
#include <cstdint>
#include <string>

namespace cactus {
namespace byte_level {

// The UTF-8 text of the code point that stands for `byte` ("Ġ" for ' ').
const std::string& byte_to_unicode(uint8_t byte);
// Returns -1 when the code point is not the image of a byte.
int unicode_to_byte(uint32_t cp);

}  // namespace byte_level
}  // namespace cactus
