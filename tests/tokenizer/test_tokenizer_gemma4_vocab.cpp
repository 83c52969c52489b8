// gemma4's SentencePiece-style BPE on a small hand-made vocabulary: ranked merges over raw UTF-8
// with spaces as U+2581, newline runs, <0xXX> byte fallback, forced BOS, the end-of-generation
// set, and how control / user-defined tokens are split out and rendered (llama.cpp's rules).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {
namespace {

const int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kByte = 6;
const std::string kSpace = "\xe2\x96\x81";  // U+2581

void add(TokenizerSpec& spec, const std::string& text, int32_t type) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
    spec.scores.push_back(0.0f);
}

int32_t id_of(const TokenizerSpec& spec, const std::string& text) {
    const auto it = std::find(spec.tokens.begin(), spec.tokens.end(), text);
    return it == spec.tokens.end() ? -1 : static_cast<int32_t>(it - spec.tokens.begin());
}

// Laid out like the real vocabulary: specials first, newline runs, byte tokens, then pieces.
TokenizerSpec gemma4_spec() {
    TokenizerSpec spec;
    spec.model = "gemma4";
    spec.pre = "something-else";  // llama.cpp uses "gemma4" whatever the file says
    for (const char* text : {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>"}) add(spec, text, kControl);
    for (const char* text : {"<|tool_response>", "<|\"|>", "<|channel>"}) add(spec, text, kUserDefined);
    for (const char* text : {"\n", "\n\n", "\n\n\n"}) add(spec, text, kNormal);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(spec, std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", kByte);
    for (const char* text : {"h", "e", "l", "o", "w", "r", "d", "a", ",", "\t"}) add(spec, text, kNormal);
    add(spec, kSpace, kNormal);
    add(spec, "</s>", kNormal);
    // Ranks are the merge order: "\n \n" comes first, so merging "\n\n\n" gives "\n\n" + "\n".
    const std::vector<std::pair<std::string, std::string>> merges = {
        {"\n", "\n"},      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"},
        {kSpace, "hello"}, {"w", "o"}, {"r", "d"}, {"wo", "rd"}, {kSpace, kSpace}};
    for (const auto& [left, right] : merges) {
        spec.merges.push_back(left + " " + right);
        if (id_of(spec, left + right) < 0) add(spec, left + right, kNormal);
    }
    spec.bos_id = id_of(spec, "<bos>");
    spec.eos_id = id_of(spec, "<eos>");
    spec.unk_id = id_of(spec, "<unk>");
    spec.pad_id = id_of(spec, "<pad>");
    spec.add_bos = false;  // converted files may say so; llama.cpp adds BOS anyway
    spec.add_space_prefix = false;
    return spec;
}

std::vector<int32_t> ids_of(const TokenizerSpec& spec, std::initializer_list<std::string> texts) {
    std::vector<int32_t> ids;
    for (const std::string& text : texts) ids.push_back(id_of(spec, text));
    return ids;
}

TEST(Gemma4Tokenizer, MergesByRankOverEscapedSpacesAndAlwaysAddsBos) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    EXPECT_TRUE(tok->add_bos());
    EXPECT_EQ(tok->encode("hello hello", false, false), ids_of(spec, {"hello", kSpace + "hello"}));
    std::vector<int32_t> with_bos = ids_of(spec, {"<bos>", "hello", kSpace, "word"});
    EXPECT_EQ(tok->encode("hello word", true, false), with_bos);
    // Spaces are never a word boundary: "  " is one merged token, leading and trailing alike.
    EXPECT_EQ(tok->encode("  a  ", false, false), ids_of(spec, {kSpace + kSpace, "a", kSpace + kSpace}));
    EXPECT_EQ(tok->decode(tok->encode("  a  ", false, false)), "  a  ");
}

TEST(Gemma4Tokenizer, NewlineRunThatIsATokenSkipsTheMerges) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    // Merging "\n\n\n" would give "\n\n" + "\n"; the run is a token, so it stays whole.
    EXPECT_EQ(tok->encode("\n\n\n", false, false), ids_of(spec, {"\n\n\n"}));
    // A run with no token of its own is merged: "\n\n" + "\n\n".
    EXPECT_EQ(tok->encode("\n\n\n\n", false, false), ids_of(spec, {"\n\n", "\n\n"}));
    // Runs are words of their own: "a\n" never merges across the newline.
    EXPECT_EQ(tok->encode("hello\n\nhello", false, false), ids_of(spec, {"hello", "\n\n", "hello"}));
    EXPECT_EQ(tok->encode("\t\n", false, false), ids_of(spec, {"\t", "\n"}));
}

TEST(Gemma4Tokenizer, UnknownBytesFallBackToByteTokens) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    const std::string text = "h\xc3\xa9";  // "hé": é has no token
    EXPECT_EQ(tok->encode(text, false, false), ids_of(spec, {"h", "<0xC3>", "<0xA9>"}));
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)), text);
    EXPECT_EQ(tok->token_to_piece(id_of(spec, "<0xC3>")), "\xc3");
}

TEST(Gemma4Tokenizer, InvalidUtf8IsDecodedLikeLlamaCpp) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    // A stray byte becomes U+FFFD (EF BF BD), which then falls back to its three bytes.
    EXPECT_EQ(tok->encode("a\xff", false, false), ids_of(spec, {"a", "<0xEF>", "<0xBF>", "<0xBD>"}));
    // Surrogates and overlong forms are decoded to their value and written back in the
    // shortest form: a surrogate keeps its bytes, overlong NUL becomes one 0x00 byte.
    EXPECT_EQ(tok->encode("\xed\xa0\x80", false, false), ids_of(spec, {"<0xED>", "<0xA0>", "<0x80>"}));
    EXPECT_EQ(tok->encode("\xc0\x80", false, false), ids_of(spec, {"<0x00>"}));
    // Above U+10FFFF (where llama.cpp's re-encoding throws) the sequence becomes one U+FFFD.
    EXPECT_EQ(tok->encode("\xf5\x80\x80\x80", false, false), ids_of(spec, {"<0xEF>", "<0xBF>", "<0xBD>"}));
}

TEST(Gemma4Tokenizer, EndOfGenerationSetAndRendering) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    // By text, as llama.cpp: <eos>, <turn|> and <|tool_response>; </s> is ordinary text here.
    std::vector<int32_t> eog = tok->end_of_generation_ids();
    std::sort(eog.begin(), eog.end());
    EXPECT_EQ(eog, ids_of(spec, {"<eos>", "<turn|>", "<|tool_response>"}));
    EXPECT_EQ(tok->eot_id(), -1);
    EXPECT_FALSE(tok->is_control(id_of(spec, "</s>")));
    EXPECT_EQ(tok->token_to_piece(id_of(spec, "</s>")), "</s>");
    // <|tool_response> became control (it ends generation); the other user-defined tokens are
    // always rendered.
    const int32_t tool_response = id_of(spec, "<|tool_response>"), quote = id_of(spec, "<|\"|>");
    EXPECT_TRUE(tok->is_control(tool_response));
    EXPECT_EQ(tok->token_to_piece(tool_response), "");
    EXPECT_EQ(tok->token_to_piece(tool_response, true), "<|tool_response>");
    EXPECT_FALSE(tok->is_control(quote));
    EXPECT_EQ(tok->token_to_piece(quote), "<|\"|>");
    EXPECT_EQ(tok->token_to_piece(id_of(spec, "<turn|>")), "");
    EXPECT_EQ(tok->token_to_piece(id_of(spec, "<turn|>"), true), "<turn|>");
}

TEST(Gemma4Tokenizer, SpecialTokensSplitOutLikeLlamaCpp) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    const std::string text = "<|turn>hello<|\"|>word<turn|>\n";
    EXPECT_EQ(tok->encode(text, true, true),
              ids_of(spec, {"<bos>", "<|turn>", "hello", "<|\"|>", "word", "<turn|>", "\n"}));
    // Without parse_special only user-defined tokens are split out (<|tool_response> is control).
    const auto plain = tok->encode("<|turn>a<|\"|>a<|tool_response>", false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), id_of(spec, "<|turn>")), 0);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), id_of(spec, "<|\"|>")), 1);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), id_of(spec, "<|tool_response>")), 0);
    EXPECT_EQ(tok->decode(plain), "<|turn>a<|\"|>a<|tool_response>");
    EXPECT_EQ(tok->decode(tok->encode(text, true, true)), "hello<|\"|>word\n");
    EXPECT_EQ(tok->decode(tok->encode(text, true, true), true), "<bos><|turn>hello<|\"|>word<turn|>\n");
}

TEST(Gemma4Tokenizer, DecodeCleansSpacesBeforePunctuation) {
    const TokenizerSpec spec = gemma4_spec();
    const auto tok = Tokenizer::from_spec(spec);
    // llama.cpp's clean_spaces holds for gemma4: " ," loses its space in llama_detokenize.
    const auto ids = tok->encode("hello , word", false, false);
    EXPECT_EQ(ids, ids_of(spec, {"hello", kSpace, ",", kSpace, "word"}));
    EXPECT_EQ(tok->decode(ids), "hello, word");
    EXPECT_EQ(tok->token_to_piece(id_of(spec, kSpace + "hello")), " hello");
}

TEST(Gemma4Tokenizer, NoDefaultSpecialIds) {
    TokenizerSpec spec = gemma4_spec();
    spec.bos_id.reset();  // BOS is always added, so a file without one cannot be used
    EXPECT_THROW(Tokenizer::from_spec(spec), Error);
    TokenizerSpec no_merges = gemma4_spec();
    no_merges.merges.clear();
    EXPECT_THROW(Tokenizer::from_spec(no_merges), Error);
}

TEST(Gemma4Tokenizer, Gpt2ModelWithGemma4PreTokenizerEncodesTheSame) {
    const TokenizerSpec gemma4 = gemma4_spec();
    TokenizerSpec gpt2 = gemma4;
    gpt2.model = "gpt2";
    gpt2.pre = "granite-embed-multi-311m";  // llama.cpp's other name for the gemma4 pre-tokenizer
    const auto a = Tokenizer::from_spec(gemma4);
    const auto b = Tokenizer::from_spec(gpt2);
    for (const std::string text : {"hello word", "\n\n\n a\xff", "h\xc3\xa9 ,"}) {
        EXPECT_EQ(a->encode(text, true, true), b->encode(text, true, true)) << text;
        EXPECT_EQ(a->decode(a->encode(text, false, false)), b->decode(b->encode(text, false, false))) << text;
    }
}

TEST(PreTokenizer, NewlineRunsSplitByHandOnAnyBytes) {
    const PreTokenizer pre(pre_tokenizer_config("gemma4").regexes);
    const std::vector<std::string> expected = {"a b", "\n\n", "\xff\xed\xa0\x80", "\n"};
    EXPECT_EQ(pre.split("a b\n\n\xff\xed\xa0\x80\n"), expected);
    EXPECT_TRUE(pre.split("").empty());
    const std::vector<std::string> single = {"\n"};
    EXPECT_EQ(pre.split("\n"), single);
}

}  // namespace
}  // namespace cactus
