// StreamingDetokenizer and UTF-8 helpers: characters split across tokens are held back, never
// emitted in part; bad bytes become U+FFFD.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {
namespace {

// A vocabulary of the 256 byte tokens only, so any byte sequence can be streamed token by token.
std::unique_ptr<Tokenizer> byte_tokenizer() {
    TokenizerSpec spec;
    spec.model = "llama";
    static const char* hex = "0123456789ABCDEF";
    spec.tokens = {"<unk>", "<s>", "</s>"};
    spec.token_types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        spec.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        spec.token_types.push_back(6);
    }
    spec.add_space_prefix = false;
    return Tokenizer::from_spec(spec);
}

int32_t byte_id(uint8_t b) { return 3 + b; }

std::string stream_bytes(const Tokenizer& tok, const std::string& bytes, std::vector<std::string>* pieces) {
    StreamingDetokenizer stream(tok);
    std::string out;
    for (const char c : bytes) {
        const std::string piece = stream.push(byte_id(static_cast<uint8_t>(c)));
        if (pieces) pieces->push_back(piece);
        out += piece;
    }
    return out + stream.flush();
}

TEST(StreamingDetokenizer, HoldsBackSplitMultiByteCharacters) {
    const auto tok = byte_tokenizer();
    std::vector<std::string> pieces;
    const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z
    EXPECT_EQ(stream_bytes(*tok, text, &pieces), text);
    const std::vector<std::string> expected = {"a", "", "\xc3\xa9",         "", "", "\xe2\x82\xac", "",
                                               "",  "", "\xf0\x9f\x98\x80", "z"};
    EXPECT_EQ(pieces, expected);
}

TEST(StreamingDetokenizer, EveryPieceIsValidUtf8) {
    const auto tok = byte_tokenizer();
    const std::string text = "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x87\xab\xf0\x9f\x87\xb7 \xd0\x9f";
    std::vector<std::string> pieces;
    EXPECT_EQ(stream_bytes(*tok, text, &pieces), text);
    for (const std::string& piece : pieces) EXPECT_EQ(utf8::sanitize(piece), piece);
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
    const auto tok = byte_tokenizer();
    const std::string fffd = "\xef\xbf\xbd";
    EXPECT_EQ(stream_bytes(*tok,
                           "a\xff"
                           "b",
                           nullptr),
              "a" + fffd + "b");
    EXPECT_EQ(stream_bytes(*tok,
                           "a\xe2\x82"
                           "b",
                           nullptr),
              "a" + fffd + "b");                                                 // one per bad subpart
    EXPECT_EQ(stream_bytes(*tok, "x\xf0\x9f\x98", nullptr), "x" + fffd);         // flush of a cut tail
    EXPECT_EQ(stream_bytes(*tok, "\xed\xa0\x80", nullptr), fffd + fffd + fffd);  // surrogate
    EXPECT_EQ(stream_bytes(*tok, "\xc0\x80", nullptr), fffd + fffd);             // overlong
}

TEST(StreamingDetokenizer, ResetDropsPendingBytes) {
    const auto tok = byte_tokenizer();
    StreamingDetokenizer stream(*tok);
    EXPECT_EQ(stream.push(byte_id(0xE2)), "");
    EXPECT_EQ(stream.pending_bytes(), 1u);
    stream.reset();
    EXPECT_EQ(stream.push(byte_id('a')), "a");
    EXPECT_EQ(stream.flush(), "");
}

TEST(StreamingDetokenizer, ControlTokensRenderOnlyWhenAsked) {
    const auto tok = byte_tokenizer();
    StreamingDetokenizer plain(*tok);
    EXPECT_EQ(plain.push(2), "");
    StreamingDetokenizer rendered(*tok, true);
    EXPECT_EQ(rendered.push(2), "</s>");
}

TEST(ByteLevel, ByteMapIsABijection) {
    for (int b = 0; b < 256; ++b) {
        const std::string image = byte_level::byte_to_unicode(static_cast<uint8_t>(b));
        const auto cps = utf8::decode(image);
        ASSERT_EQ(cps.size(), 1u);
        EXPECT_EQ(byte_level::unicode_to_byte(cps[0]), b);
    }
    EXPECT_EQ(byte_level::byte_to_unicode(' '), "\xc4\xa0");  // "Ġ"
    EXPECT_EQ(byte_level::unicode_to_byte(0x4E2D), -1);
}

}  // namespace
}  // namespace cactus
