// The one UTF-8 encoder/decoder (src/core/utf8.h), used by the tokenizers, the chat templates'
// string escapes, the tool-call parsers and BM25's word splitter.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace {

using namespace cactus;

// The encoder the chat template lexer and the tool-call parser had of their own (no bound check):
// utf8::append must write the same bytes for every code point they can produce (<= U+10FFFF).
std::string reference_encode(uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

TEST(Utf8, EncodesEveryCodePointAsBefore) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        ASSERT_EQ(utf8::encode(cp), reference_encode(cp)) << "U+" << std::hex << cp;
    }
}

TEST(Utf8, EncodeBoundaries) {
    EXPECT_EQ(utf8::encode(0x7F), "\x7f");
    EXPECT_EQ(utf8::encode(0x80), "\xc2\x80");
    EXPECT_EQ(utf8::encode(0x7FF), "\xdf\xbf");
    EXPECT_EQ(utf8::encode(0x800), "\xe0\xa0\x80");
    EXPECT_EQ(utf8::encode(0xFFFF), "\xef\xbf\xbf");
    EXPECT_EQ(utf8::encode(0x10000), "\xf0\x90\x80\x80");
    EXPECT_EQ(utf8::encode(0x10FFFF), "\xf4\x8f\xbf\xbf");
    EXPECT_EQ(utf8::encode(0xD800), "\xed\xa0\x80");  // a lone surrogate keeps its three bytes
}

TEST(Utf8, BeyondTheLastCodePointIsTheReplacementCharacter) {
    EXPECT_EQ(utf8::encode(0x110000), "\xef\xbf\xbd");
    EXPECT_EQ(utf8::encode(0xFFFFFFFFu), "\xef\xbf\xbd");
}

TEST(Utf8, DecodeRoundTripsEveryScalarValue) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x1000 ? 1 : 97)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        const std::string bytes = utf8::encode(cp);
        size_t offset = 0;
        ASSERT_EQ(utf8::decode_one(bytes, offset), cp);
        ASSERT_EQ(offset, bytes.size());
        ASSERT_EQ(utf8::strict_sequence_length(bytes, 0), static_cast<int>(bytes.size()));
    }
}

TEST(Utf8, LenientDecodeMatchesLlamaCpp) {
    EXPECT_EQ(utf8::decode("a\xc3\xa9"), (std::vector<uint32_t>{'a', 0xE9}));
    EXPECT_EQ(utf8::decode("\xff"
                           "a"),
              (std::vector<uint32_t>{0xFFFD, 'a'}));
    EXPECT_EQ(utf8::decode("\xc0\x80"), (std::vector<uint32_t>{0}));  // overlong kept, as llama.cpp
    EXPECT_EQ(utf8::decode("\xe2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
    EXPECT_EQ(utf8::decode("\x80"), (std::vector<uint32_t>{0xFFFD}));  // stray continuation byte
}

TEST(Utf8, InvalidBytesAdvanceByOne) {
    // BM25's word splitter tells an invalid byte (U+FFFD, one byte) from a real U+FFFD (three).
    size_t offset = 0;
    EXPECT_EQ(utf8::decode_one("\xf8\x80\x80\x80", offset), utf8::kReplacementChar);
    EXPECT_EQ(offset, 1u);
    offset = 0;
    EXPECT_EQ(utf8::decode_one("\xef\xbf\xbd", offset), utf8::kReplacementChar);
    EXPECT_EQ(offset, 3u);
}

// The decoder BM25's word splitter and the server's whole-character prefix had of their own:
// its length, 0 for an invalid or cut-short sequence. decode_one must accept exactly the same
// sequences, with the same value, and step one byte where this returned 0.
size_t reference_decode(const std::string& s, size_t i, uint32_t* cp) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
        const unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) return 0;
        v = (v << 6) | (cc & 0x3F);
    }
    *cp = v;
    return n;
}

TEST(Utf8, DecodeOneAcceptsWhatTheOtherDecodersAccepted) {
    std::mt19937 rng(11);
    // Bytes drawn mostly from lead and continuation ranges, so every branch is hit often.
    const uint8_t picks[] = {0x00, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF,
                             0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xF7, 0xF8, 0xFE, 0xFF};
    std::uniform_int_distribution<size_t> pick(0, sizeof picks - 1), length(1, 6);
    for (int trial = 0; trial < 200000; ++trial) {
        std::string s;
        for (size_t k = length(rng); k > 0; --k) s += static_cast<char>(picks[pick(rng)]);
        uint32_t want = 0;
        const size_t n = reference_decode(s, 0, &want);
        size_t offset = 0;
        const uint32_t got = utf8::decode_one(s, offset);
        if (n == 0) {
            ASSERT_EQ(got, utf8::kReplacementChar) << trial;
            ASSERT_EQ(offset, 1u) << trial;
        } else {
            ASSERT_EQ(got, want) << trial;
            ASSERT_EQ(offset, n) << trial;
        }
    }
}

TEST(Utf8, StrictLengthRejectsOverlongsSurrogatesAndTooLarge) {
    EXPECT_EQ(utf8::strict_sequence_length("\xc0\x80", 0), -1);
    EXPECT_EQ(utf8::strict_sequence_length("\xe0\x80\x80", 0), -1);
    EXPECT_EQ(utf8::strict_sequence_length("\xed\xa0\x80", 0), -1);
    EXPECT_EQ(utf8::strict_sequence_length("\xf4\x90\x80\x80", 0), -1);
    EXPECT_EQ(utf8::strict_sequence_length("\xe2\x82", 0), 0);  // valid prefix, incomplete
    EXPECT_EQ(utf8::strict_sequence_length("\xe2\x82x", 0), -2);
}

TEST(Utf8, SanitizeReplacesEachMaximalInvalidSubpart) {
    EXPECT_EQ(utf8::sanitize("ok"), "ok");
    EXPECT_EQ(utf8::sanitize("a\xe2\x82x"), "a\xef\xbf\xbdx");
    EXPECT_EQ(utf8::sanitize("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(utf8::sanitize("tail\xf0\x9f"), "tail\xef\xbf\xbd");
}

}  // namespace
