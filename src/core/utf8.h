#pragma once
// The one UTF-8 encoder and decoder of the library: lenient decoding (as llama.cpp does it, so the
// tokenizers' ids match), encoding (the chat templates' and tool calls' \u escapes too), and a
// strict scanner that finds where complete characters end (the streaming detokenizer, sanitize).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cactus {
namespace utf8 {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte announces (1 for ASCII and for stray continuation bytes).
size_t sequence_length(uint8_t lead_byte);

// Decodes one code point at `offset` and advances it. Invalid bytes give U+FFFD and advance by
// one byte. Overlong forms and surrogates decode to their value (as llama.cpp does).
uint32_t decode_one(const std::string& text, size_t& offset);
std::vector<uint32_t> decode(const std::string& text);

// Encodes a code point; values above U+10FFFF become U+FFFD. Surrogates (a lone \uD800 escape)
// are written as their three bytes, not replaced: sanitize() is the strict step.
void append(std::string& out, uint32_t cp);
std::string encode(uint32_t cp);

// Strictly validates the sequence starting at `offset` (no overlongs, no surrogates, <= U+10FFFF).
// Returns its length when complete and valid, 0 when the bytes present are a valid but
// incomplete prefix that runs to the end of `text`, and -k when invalid, k >= 1 being the length
// of the maximal invalid subpart (the bytes one U+FFFD stands for, as Unicode recommends).
int strict_sequence_length(const std::string& text, size_t offset);

// Replaces each maximal invalid subpart with one U+FFFD (an incomplete tail included).
std::string sanitize(const std::string& text);

}  // namespace utf8
}  // namespace cactus
