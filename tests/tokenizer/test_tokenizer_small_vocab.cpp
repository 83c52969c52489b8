// Tokenizers built from small hand-made vocabularies: byte fallback, special-token splitting,
// BOS/EOS flags, pre-tokenizer splits, errors on bad metadata.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {
namespace {

const int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

void add(TokenizerSpec& spec, const std::string& text, int32_t type, float score = 0.0f) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
    spec.scores.push_back(score);
}

int32_t id_of(const TokenizerSpec& spec, const std::string& text) {
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
        if (spec.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
}

// SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, a few pieces, special tokens.
TokenizerSpec spm_spec() {
    TokenizerSpec spec;
    spec.model = "llama";
    add(spec, "<unk>", kUnknown);
    add(spec, "<s>", kControl);
    add(spec, "</s>", kControl);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(spec, std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", kByte);
    const char* pieces[] = {"\xe2\x96\x81",
                            "h",
                            "e",
                            "l",
                            "o",
                            "w",
                            "r",
                            "d",
                            "he",
                            "ll",
                            "llo",
                            "hello",
                            "\xe2\x96\x81hello",
                            "\xe2\x96\x81w",
                            "or",
                            "\xe2\x96\x81wor",
                            "ld",
                            "\xe2\x96\x81world",
                            "a",
                            "b",
                            "c",
                            "bc"};
    float score = -100.0f;
    for (const char* piece : pieces) add(spec, piece, kNormal, score += 1.0f);
    add(spec, "<ctrl>", kControl);
    add(spec, "<|user|>", kUserDefined);
    add(spec, "bcd", kControl);
    add(spec, "ab", kControl);
    spec.bos_id = 1;
    spec.eos_id = 2;
    spec.unk_id = 0;
    spec.add_bos = true;
    spec.add_eos = false;
    spec.add_space_prefix = true;
    return spec;
}

TEST(SpmTokenizer, MergesByScoreAndAddsBosAndPrefixSpace) {
    const TokenizerSpec spec = spm_spec();
    const auto tok = Tokenizer::from_spec(spec);
    const auto ids = tok->encode("hello world", true, false);
    const std::vector<int32_t> expected = {1, id_of(spec, "\xe2\x96\x81hello"), id_of(spec, "\xe2\x96\x81world")};
    EXPECT_EQ(ids, expected);
    // As llama_detokenize: the prefix space is dropped from the first token only, so a leading
    // BOS (which renders as nothing) keeps it.
    EXPECT_EQ(tok->decode(ids), " hello world");
    EXPECT_EQ(tok->decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), "hello world");
    EXPECT_EQ(tok->decode(ids, true), "<s> hello world");
}

TEST(SpmTokenizer, ByteFallbackForUnknownCharacters) {
    const TokenizerSpec spec = spm_spec();
    const auto tok = Tokenizer::from_spec(spec);
    const auto ids = tok->encode("h\xc3\xa9", false, false);  // "hé"
    const std::vector<int32_t> expected = {id_of(spec, "\xe2\x96\x81"), id_of(spec, "h"), id_of(spec, "<0xC3>"),
                                           id_of(spec, "<0xA9>")};
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(tok->decode(ids), "h\xc3\xa9");
    EXPECT_EQ(tok->token_to_piece(id_of(spec, "<0xC3>")), "\xc3");
}

TEST(SpmTokenizer, BosAndEosFlags) {
    TokenizerSpec spec = spm_spec();
    spec.add_bos = false;
    spec.add_eos = true;
    spec.add_space_prefix = false;
    const auto tok = Tokenizer::from_spec(spec);
    EXPECT_FALSE(tok->add_bos());
    EXPECT_TRUE(tok->add_eos());
    const std::vector<int32_t> with_special = {id_of(spec, "hello"), 2};
    EXPECT_EQ(tok->encode("hello", true, false), with_special);
    const std::vector<int32_t> without = {id_of(spec, "hello")};
    EXPECT_EQ(tok->encode("hello", false, false), without);
    EXPECT_TRUE(tok->encode("", false, false).empty());
    EXPECT_EQ(tok->encode("", true, false), std::vector<int32_t>{2});
}

TEST(SpmTokenizer, SplitsSpecialTokensOnlyWhenAsked) {
    TokenizerSpec spec = spm_spec();
    spec.add_space_prefix = false;
    const auto tok = Tokenizer::from_spec(spec);
    const int32_t ctrl = id_of(spec, "<ctrl>"), user = id_of(spec, "<|user|>");
    const auto parsed = tok->encode("a<ctrl>b", false, true);
    const std::vector<int32_t> expected = {id_of(spec, "a"), ctrl, id_of(spec, "b")};
    EXPECT_EQ(parsed, expected);
    const auto literal = tok->encode("a<ctrl>b", false, false);
    EXPECT_EQ(std::count(literal.begin(), literal.end(), ctrl), 0);
    EXPECT_EQ(tok->decode(literal), "a<ctrl>b");
    // user-defined tokens are split out even without parse_special
    const auto user_ids = tok->encode("a<|user|>b", false, false);
    const std::vector<int32_t> expected_user = {id_of(spec, "a"), user, id_of(spec, "b")};
    EXPECT_EQ(user_ids, expected_user);
    EXPECT_EQ(tok->token_to_piece(user), "<|user|>");
    EXPECT_EQ(tok->token_to_piece(ctrl), "");
    EXPECT_EQ(tok->token_to_piece(ctrl, true), "<ctrl>");
    EXPECT_TRUE(tok->is_control(ctrl));
    EXPECT_FALSE(tok->is_control(user));
}

TEST(SpmTokenizer, LongerSpecialTokenWinsLikeLlamaCpp) {
    TokenizerSpec spec = spm_spec();
    spec.add_space_prefix = false;
    const auto tok = Tokenizer::from_spec(spec);
    // "bcd" (3 bytes) is taken before "ab" (2 bytes) although "ab" starts first.
    const std::vector<int32_t> expected = {id_of(spec, "a"), id_of(spec, "bcd")};
    EXPECT_EQ(tok->encode("abcd", false, true), expected);
    const std::vector<int32_t> twice = {id_of(spec, "ab"), id_of(spec, "ab")};
    EXPECT_EQ(tok->encode("abab", false, true), twice);
}

TEST(SpmTokenizer, BadIdsAndMetadataThrow) {
    const auto tok = Tokenizer::from_spec(spm_spec());
    EXPECT_THROW(tok->token_to_piece(-1), Error);
    EXPECT_THROW(tok->token_to_piece(static_cast<int32_t>(tok->vocab_size())), Error);
    EXPECT_THROW(tok->decode({1, 1000000}), Error);

    TokenizerSpec unknown_model = spm_spec();
    unknown_model.model = "t5";  // llama.cpp's UGM, which cactus does not implement
    EXPECT_THROW(Tokenizer::from_spec(unknown_model), Error);
    TokenizerSpec short_types = spm_spec();
    short_types.token_types.resize(3);
    EXPECT_THROW(Tokenizer::from_spec(short_types), Error);
    TokenizerSpec duplicate = spm_spec();
    duplicate.tokens[5] = duplicate.tokens[6];
    EXPECT_THROW(Tokenizer::from_spec(duplicate), Error);
    TokenizerSpec empty;
    empty.model = "llama";
    EXPECT_THROW(Tokenizer::from_spec(empty), Error);
}

TEST(SpmTokenizer, EndOfGenerationIdsIncludeEosAndTurnMarkers) {
    TokenizerSpec spec = spm_spec();
    add(spec, "<end_of_turn>", kNormal);  // found by text and treated as control, as llama.cpp
    const auto tok = Tokenizer::from_spec(spec);
    const int32_t eot = id_of(spec, "<end_of_turn>");
    EXPECT_TRUE(tok->is_end_of_generation(2));
    EXPECT_TRUE(tok->is_end_of_generation(eot));
    EXPECT_FALSE(tok->is_end_of_generation(1));
    EXPECT_EQ(tok->eot_id(), eot);
    EXPECT_TRUE(tok->is_control(eot));
}

// Byte-level BPE: every byte's printable image is a token, plus a few merges.
TokenizerSpec bpe_spec() {
    TokenizerSpec spec;
    spec.model = "gpt2";
    spec.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) add(spec, byte_level::byte_to_unicode(static_cast<uint8_t>(b)), kNormal);
    const std::string space = byte_level::byte_to_unicode(' ');  // "Ġ"
    const std::vector<std::pair<std::string, std::string>> merges = {
        {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {space, "hello"}};
    for (const auto& [left, right] : merges) {
        spec.merges.push_back(left + " " + right);
        if (id_of(spec, left + right) < 0) add(spec, left + right, kNormal);
    }
    add(spec, "<|endoftext|>", kControl);
    spec.bos_id = id_of(spec, "<|endoftext|>");
    spec.eos_id = spec.bos_id;
    return spec;
}

TEST(BpeTokenizer, MergesByRankAndRoundTripsBytes) {
    const TokenizerSpec spec = bpe_spec();
    const auto tok = Tokenizer::from_spec(spec);
    const std::string space = byte_level::byte_to_unicode(' ');
    const std::vector<int32_t> expected = {id_of(spec, "hello"), id_of(spec, space + "hello")};
    EXPECT_EQ(tok->encode("hello hello", false, false), expected);
    const std::string text = "Grüße, 世界! \xf0\x9f\x98\x80\n\tx";
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)), text);
    EXPECT_FALSE(tok->add_bos());
    EXPECT_TRUE(tok->is_end_of_generation(spec.bos_id.value()));
}

TEST(BpeTokenizer, InvalidUtf8BecomesReplacementCharacter) {
    const auto tok = Tokenizer::from_spec(bpe_spec());
    EXPECT_EQ(tok->decode(tok->encode("a\xff"
                                      "b",
                                      false, false)),
              "a\xef\xbf\xbd"
              "b");
}

TEST(BpeTokenizer, UnknownPreTokenizerThrows) {
    TokenizerSpec spec = bpe_spec();
    spec.pre = "no-such-pre";
    EXPECT_THROW(Tokenizer::from_spec(spec), Error);
    TokenizerSpec no_merges = bpe_spec();
    no_merges.merges.clear();
    EXPECT_THROW(Tokenizer::from_spec(no_merges), Error);
}

TEST(PreTokenizer, SmollmSplitsDigitsThenGpt2Words) {
    const PreTokenizer pre(pre_tokenizer_config("smollm").regexes);
    const std::vector<std::string> expected = {"abc", " ", "1", "2", "3", " ", " def", "\n"};
    EXPECT_EQ(pre.split("abc 123  def\n"), expected);
    const std::vector<std::string> contractions = {"I", "'m", " don", "'t", "!!", " \xce\xb1\xce\xb2"};
    EXPECT_EQ(pre.split("I'm don't!! \xce\xb1\xce\xb2"), contractions);
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
    const PreTokenizer pre(pre_tokenizer_config("llama3").regexes);
    const std::vector<std::string> expected = {"123", "456", "7", " x", "\n\n"};
    EXPECT_EQ(pre.split("1234567 x\n\n"), expected);
}

TEST(PreTokenizer, NonAsciiWhitespaceCountsAsSpace) {
    const PreTokenizer pre(pre_tokenizer_config("gpt-2").regexes);
    // U+0085 (NEL) is whitespace for llama.cpp, unlike PCRE2's default \s
    const std::vector<std::string> expected = {"a", "\xc2\x85", "\xc2\x85", "b"};
    EXPECT_EQ(pre.split("a\xc2\x85\xc2\x85"
                        "b"),
              expected);
}

}  // namespace
}  // namespace cactus
