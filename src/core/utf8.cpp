#include "core/utf8.h"

namespace cactus {
namespace utf8 {

size_t sequence_length(uint8_t lead_byte) {
    static const size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead_byte >> 4];
}

static bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

uint32_t decode_one(const std::string& text, size_t& offset) {
    const size_t n = text.size();
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t b0 = byte(offset);
    if (!(b0 & 0x80)) {
        offset += 1;
        return b0;
    }
    if ((b0 & 0x40) && !(b0 & 0x20)) {
        if (offset + 1 < n && is_continuation(byte(offset + 1))) {
            const uint32_t cp = ((b0 & 0x1Fu) << 6) | (byte(offset + 1) & 0x3Fu);
            offset += 2;
            return cp;
        }
    } else if ((b0 & 0x40) && !(b0 & 0x10)) {
        if (offset + 2 < n && is_continuation(byte(offset + 1)) && is_continuation(byte(offset + 2))) {
            const uint32_t cp = ((b0 & 0x0Fu) << 12) | ((byte(offset + 1) & 0x3Fu) << 6) | (byte(offset + 2) & 0x3Fu);
            offset += 3;
            return cp;
        }
    } else if ((b0 & 0x40) && !(b0 & 0x08)) {
        if (offset + 3 < n && is_continuation(byte(offset + 1)) && is_continuation(byte(offset + 2)) &&
            is_continuation(byte(offset + 3))) {
            const uint32_t cp = ((b0 & 0x07u) << 18) | ((byte(offset + 1) & 0x3Fu) << 12) |
                                ((byte(offset + 2) & 0x3Fu) << 6) | (byte(offset + 3) & 0x3Fu);
            offset += 4;
            return cp;
        }
    }
    offset += 1;
    return kReplacementChar;
}

std::vector<uint32_t> decode(const std::string& text) {
    std::vector<uint32_t> cps;
    cps.reserve(text.size());
    size_t offset = 0;
    while (offset < text.size()) cps.push_back(decode_one(text, offset));
    return cps;
}

void append(std::string& out, uint32_t cp) {
    if (cp <= 0x7F) {
        out.push_back(static_cast<char>(cp));
    } else if (cp <= 0x7FF) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0xFFFF) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0x10FFFF) {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        append(out, kReplacementChar);
    }
}

std::string encode(uint32_t cp) {
    std::string out;
    append(out, cp);
    return out;
}

int strict_sequence_length(const std::string& text, size_t offset) {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t b0 = byte(offset);
    if (b0 < 0x80) return 1;
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
    } else {
        return -1;
    }
    for (int i = 1; i < need; ++i) {
        if (offset + i >= text.size()) return 0;  // valid so far, but incomplete
        const uint8_t b = byte(offset + i);
        const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
        if (!ok) return -i;
    }
    return need;
}

std::string sanitize(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    size_t offset = 0;
    while (offset < text.size()) {
        const int len = strict_sequence_length(text, offset);
        if (len > 0) {
            out.append(text, offset, static_cast<size_t>(len));
            offset += static_cast<size_t>(len);
        } else {
            append(out, kReplacementChar);
            offset = len == 0 ? text.size() : offset + static_cast<size_t>(-len);
        }
    }
    return out;
}

}  // namespace utf8
}  // namespace cactus
