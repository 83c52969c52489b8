// WordPiece (BERT, tokenizer.ggml.model = "bert") against Hugging Face tokenizers: the GGUF
// vocabulary is built from all-MiniLM-L6-v2's vocab.txt (tests/tokenizer/data/minilm_vocab.txt)
// the way llama.cpp's converter writes it (BertModel.set_vocab: phantom-space pieces, token types,
// special ids), read back with Tokenizer::from_gguf, and every string of
// data/wordpiece_goldens.json (made by make_wordpiece_goldens.py) must give HF's ids.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {
namespace {

const std::string kDataDir = std::string(CACTUS_SOURCE_DIR) + "/tests/tokenizer/data/";
const std::string kSpace = "\xe2\x96\x81";  // U+2581

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read " + path + " (committed test data; see make_wordpiece_goldens.py)");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// The tokenizer.ggml.* keys BertModel.set_vocab and gguf.SpecialVocab write for all-MiniLM-L6-v2.
std::vector<uint8_t> minilm_tokenizer_gguf() {
    std::vector<std::string> tokens;
    std::vector<int64_t> types;
    std::istringstream lines(read_file(kDataDir + "minilm_vocab.txt"));
    for (std::string line; std::getline(lines, line);) {
        const bool special =
            line == "[PAD]" || line == "[UNK]" || line == "[CLS]" || line == "[SEP]" || line == "[MASK]";
        types.push_back(special ? static_cast<int64_t>(TokenType::Control) : static_cast<int64_t>(TokenType::Normal));
        if (special) {
            tokens.push_back(line);
        } else if (line.rfind("##", 0) == 0) {
            tokens.push_back(line.substr(2));
        } else {
            tokens.push_back(kSpace + line);
        }
    }
    GgufWriter writer;
    writer.add_string("general.architecture", "bert");
    writer.add_string("tokenizer.ggml.model", "bert");
    writer.add_string("tokenizer.ggml.pre", "default");
    writer.add_string_array("tokenizer.ggml.tokens", tokens);
    writer.add_int_array("tokenizer.ggml.token_type", GgufType::I32, types);
    writer.add_u32("tokenizer.ggml.bos_token_id", 101);
    writer.add_u32("tokenizer.ggml.eos_token_id", 102);
    writer.add_u32("tokenizer.ggml.unknown_token_id", 100);
    writer.add_u32("tokenizer.ggml.seperator_token_id", 102);
    writer.add_u32("tokenizer.ggml.padding_token_id", 0);
    writer.add_u32("tokenizer.ggml.cls_token_id", 101);
    writer.add_u32("tokenizer.ggml.mask_token_id", 103);
    writer.add_bool("tokenizer.ggml.add_bos_token", true);
    writer.add_bool("tokenizer.ggml.add_eos_token", true);
    writer.add_bool("tokenizer.ggml.add_sep_token", false);
    return writer.to_bytes();
}

const Tokenizer& minilm() {
    static const std::unique_ptr<Tokenizer> tokenizer = [] {
        const std::vector<uint8_t> bytes = minilm_tokenizer_gguf();
        const auto file = GgufFile::from_memory(bytes.data(), bytes.size());
        return Tokenizer::from_gguf(*file);
    }();
    return *tokenizer;
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string out;
    for (const int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
    return out;
}

TEST(WordPiece, GgufVocabularyAndSpecialIds) {
    const Tokenizer& tok = minilm();
    EXPECT_EQ(tok.vocab_size(), 30522u);
    EXPECT_EQ(tok.bos_id(), 101);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_TRUE(tok.is_control(101));
    EXPECT_TRUE(tok.is_control(0));
    EXPECT_FALSE(tok.is_control(7592));
    EXPECT_EQ(tok.token_text(7592), kSpace + "hello");  // word-initial pieces carry U+2581
    EXPECT_EQ(tok.token_text(2226), "u");               // "##u" is stored without its "##"
    EXPECT_EQ(tok.token_to_piece(7592), " hello");
    EXPECT_EQ(tok.token_to_piece(101), "");
    EXPECT_EQ(tok.token_to_piece(101, true), "[CLS]");
}

TEST(WordPiece, KnownIds) {
    const Tokenizer& tok = minilm();
    EXPECT_EQ(tok.encode("My name is Henry Ndubuaku", true, false),
              (std::vector<int32_t>{101, 2026, 2171, 2003, 2888, 1050, 8566, 8569, 4817, 2226, 102}));
    EXPECT_EQ(tok.encode("Café déjà vu — naïve résumé", false, false),
              (std::vector<int32_t>{7668, 2139, 3900, 24728, 1517, 15743, 13746}));
    EXPECT_EQ(tok.encode("", true, false), (std::vector<int32_t>{101, 102}));
    EXPECT_EQ(tok.encode(" \t\n ", false, false), std::vector<int32_t>{});
}

// Every golden string; CACTUS_WORDPIECE_GOLDENS points at another file (the per-code-point sweep
// of make_wordpiece_goldens.py --sweep).
TEST(WordPiece, Goldens) {
    const char* override_path = std::getenv("CACTUS_WORDPIECE_GOLDENS");
    const std::string path = override_path && override_path[0] ? override_path : kDataDir + "wordpiece_goldens.json";
    const nlohmann::json golden = nlohmann::json::parse(read_file(path));
    const Tokenizer& tok = minilm();
    size_t checked = 0, wrong = 0;
    for (const nlohmann::json& item : golden.at("cases")) {
        const std::string text = item.at("text").get<std::string>();
        const std::vector<int32_t> expected = item.at("ids").get<std::vector<int32_t>>();
        // HF always splits out its special tokens ([CLS], [MASK], ...), as parse_special does.
        const std::vector<int32_t> ids = tok.encode(text, true, true);
        ++checked;
        if (ids != expected && ++wrong <= 20) {
            ADD_FAILURE() << "text " << nlohmann::json(text).dump() << "\n  hf:   " << ids_text(expected)
                          << "\n  ours: " << ids_text(ids);
        }
    }
    EXPECT_GE(checked, 300u);
    EXPECT_EQ(wrong, 0u) << wrong << " of " << checked << " strings differ (" << path << ")";
}

TEST(WordPiece, DecodeJoinsPiecesAndCleansSpaces) {
    const Tokenizer& tok = minilm();
    EXPECT_EQ(tok.decode(tok.encode("My name is Henry Ndubuaku", true, false)), "my name is henry ndubuaku");
    EXPECT_EQ(tok.decode(tok.encode("Hello, World! It's a test.", true, false)), "hello, world! it's a test.");
    EXPECT_EQ(tok.decode(tok.encode("Café déjà vu", false, false)), "cafe deja vu");
    EXPECT_EQ(tok.decode(tok.encode("hello", true, false), true), "[CLS] hello[SEP]");
    EXPECT_EQ(tok.decode({}), "");
}

TEST(WordPiece, LongWordsBecomeOneUnknown) {
    const Tokenizer& tok = minilm();
    EXPECT_EQ(tok.encode(std::string(101, 'a'), false, false), std::vector<int32_t>{100});
    EXPECT_GT(tok.encode(std::string(100, 'a'), false, false).size(), 1u);
    // A word with a character no piece covers is one [UNK], whatever the rest matched.
    EXPECT_EQ(tok.encode("hello\xe1\x88\xb4world", false, false), std::vector<int32_t>{100});
}

// Invalid bytes become U+FFFD, which the text cleaner removes (as HF and llama.cpp do with U+FFFD),
// so the bytes on either side join.
TEST(WordPiece, InvalidUtf8IsRemoved) {
    const Tokenizer& tok = minilm();
    EXPECT_EQ(tok.encode("hel\xfflo", false, false), tok.encode("hello", false, false));
    EXPECT_EQ(tok.encode("\xc3", true, false), (std::vector<int32_t>{101, 102}));
    EXPECT_EQ(tok.encode("a \xed\xa0\x80 b", false, false), tok.encode("a b", false, false));  // surrogate
    EXPECT_EQ(tok.encode("a\xf5\x80\x80\x80", false, false), tok.encode("a", false, false));   // above U+10FFFF
}

TEST(WordPiece, RandomBytesNeverCrash) {
    const Tokenizer& tok = minilm();
    std::mt19937 rng(1234);
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < 3000; ++round) {
        std::string text(rng() % 200, '\0');
        const bool ascii = round % 3 == 0;
        for (char& c : text) c = static_cast<char>(ascii ? 0x20 + rng() % 0x60 : rng() % 256);
        const std::vector<int32_t> ids = tok.encode(text, true, round % 2 == 0);
        ASSERT_GE(ids.size(), 2u);
        for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < tok.vocab_size());
        (void)tok.decode(ids, round % 2 == 0);
    }
    // Large inputs stay linear: 1 MB of short words, and one 1 MB word.
    std::string words;
    while (words.size() < (1u << 20)) words += "embedding vectors, retrieval! ";
    EXPECT_GT(tok.encode(words, true, false).size(), 100000u);
    EXPECT_EQ(tok.encode(std::string(1u << 20, 'x'), false, false), std::vector<int32_t>{100});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(WordPiece, HandMadeVocabularyGreedyLongestMatch) {
    TokenizerSpec spec;
    spec.model = "bert";
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
        spec.tokens.push_back(t);
        spec.token_types.push_back(static_cast<int32_t>(TokenType::Control));
    }
    for (const std::string& t :
         std::vector<std::string>{kSpace + "un", kSpace + "unaff", "aff", "able", "a", "ble", kSpace + ","}) {
        spec.tokens.push_back(t);
        spec.token_types.push_back(static_cast<int32_t>(TokenType::Normal));
    }
    spec.unk_id = 1, spec.bos_id = 2, spec.sep_id = 3, spec.pad_id = 0, spec.mask_id = 4;
    const auto tok = Tokenizer::from_spec(spec);
    // Longest first: "unaff" + "able", never "un" + "aff" + "able".
    EXPECT_EQ(tok->encode("Unaffable, unable", true, false), (std::vector<int32_t>{2, 6, 8, 11, 5, 8, 3}));
    EXPECT_EQ(tok->encode("unxble", false, false), std::vector<int32_t>{1});  // "x" has no piece
    EXPECT_EQ(tok->decode(tok->encode("unaffable ,", false, false)), "unaffable,");

    spec.unk_id = 99;  // outside the vocabulary, and no default fits either
    EXPECT_THROW(Tokenizer::from_spec(spec), Error);
}

}  // namespace
}  // namespace cactus
