// JSON string escaping (src/core/json_escape.h), checked by hand and against nlohmann::json's dump.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/json_escape.h"
#include "core/utf8.h"

namespace {

using cactus::json_string;

TEST(JsonEscape, QuotesAndEscapes) {
    EXPECT_EQ(json_string(""), "\"\"");
    EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    EXPECT_EQ(json_string("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
    EXPECT_EQ(json_string(std::string("\0\x01\x1f", 3)), "\"\\u0000\\u0001\\u001f\"");
    EXPECT_EQ(json_string("\x7f/"), "\"\x7f/\"");  // DEL and '/' as they are, as json.dumps
    EXPECT_EQ(json_string("caf\xc3\xa9 \xe4\xb8\xad"), "\"caf\xc3\xa9 \xe4\xb8\xad\"");  // UTF-8 untouched
}

TEST(JsonEscape, AppendKeepsWhatIsThere) {
    std::string out = "{";
    cactus::append_json_string(out, "k");
    EXPECT_EQ(out, "{\"k\"");
}

TEST(JsonEscape, MatchesNlohmannOnValidUtf8) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> small(0, 0x7F), wide(0, 0x10FFFF);
    for (int trial = 0; trial < 2000; ++trial) {
        std::string text;
        for (int k = 0; k < 12; ++k) {
            uint32_t cp = trial % 2 ? small(rng) : wide(rng);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            cactus::utf8::append(text, cp);
        }
        ASSERT_EQ(json_string(text), nlohmann::json(text).dump()) << trial;
    }
}

}  // namespace
