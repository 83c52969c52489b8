#pragma once
// The concrete tokenizers behind Tokenizer: a shared vocabulary-based base, BPE (GPT-2 byte-level,
// or gemma4's SentencePiece-style), SentencePiece BPE and WordPiece (BERT). Internal to src/tokenizer (tests may
// include it).
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_index.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {

// SentencePiece writes a space as U+2581 in its pieces.
inline constexpr const char* kEscapedSpace = "\xe2\x96\x81";
std::string unescape_spaces(const std::string& text);  // every U+2581 back to ' '

class VocabTokenizer : public Tokenizer {
public:
    VocabTokenizer(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy = {});

    std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special) const override;
    std::string token_to_piece(int32_t id, bool render_special = false) const override;
    size_t vocab_size() const override { return vocab_.size(); }
    const std::string& token_text(int32_t id) const override;
    bool is_control(int32_t id) const override;
    const Vocab& vocab() const { return vocab_; }

protected:
    // Encodes raw text (no special tokens in it). `after_special`: the text starts the input or
    // follows a special token.
    virtual void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const = 0;
    // The bytes a normal token stands for.
    virtual std::string normal_piece(int32_t id) const = 0;
    void check_id(int32_t id, const char* function) const;

    Vocab vocab_;
};

// BPE with merges applied lowest rank first (llama.cpp's llm_tokenizer_bpe_session): GPT-2
// byte-level BPE (pre-tokenizer regexes, bytes mapped to printable code points), or, where the
// pre-tokenizer says so, SentencePiece-style BPE on raw UTF-8 (gemma4: spaces as U+2581, only
// newline runs split off, <0xXX> byte fallback).
class BpeTokenizer : public VocabTokenizer {
public:
    // `pre`: the pre-tokenizer to use (tokenizer.ggml.pre, or the one the model implies).
    BpeTokenizer(const TokenizerSpec& spec, VocabKind kind, const std::string& pre);

protected:
    void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const override;
    std::string normal_piece(int32_t id) const override;

private:
    void read_merges(const std::vector<std::string>& merges);
    std::vector<std::string> split_words(const std::string& text) const;  // in the merges' alphabet
    bool emitted_whole(const std::string& word) const;                    // skips the merges
    void encode_word(const std::string& word, std::vector<int32_t>& out) const;
    // The rank of the merge of two adjacent symbols (their texts and token ids, -1 for a text
    // that is no token), or -1 when there is none.
    int merge_rank(std::string_view left, int32_t left_id, std::string_view right, int32_t right_id) const;

    PreTokenizerConfig config_;
    PreTokenizer pre_tokenizer_;
    // Merges are pairs of texts (llama.cpp's bpe_ranks); those whose parts are both tokens are
    // keyed by the two ids, so encoding hashes integers, and the rare others by text.
    PairIndex merges_by_id_;
    std::unordered_map<std::string, int> merges_by_text_;  // key: merge_key(left, right)
    // Token of each byte for a symbol that is not a token: the byte itself as a one-byte token
    // (byte-level BPE) or <0xXX>; -1 drops the byte, as llama.cpp does.
    std::array<int32_t, 256> byte_fallback_{};
};

// SentencePiece BPE (llama / gemma vocabularies): spaces become U+2581, the pair whose merged
// text is the highest-scoring token is merged first, unknown characters fall back to <0xXX>
// byte tokens (llama.cpp's llm_tokenizer_spm_session).
class SpmTokenizer : public VocabTokenizer {
public:
    explicit SpmTokenizer(const TokenizerSpec& spec);

protected:
    void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const override;
    std::string normal_piece(int32_t id) const override;

private:
    void encode_escaped(const std::string& text, std::vector<int32_t>& out) const;
    void append_bytes(const char* bytes, size_t n, std::vector<int32_t>& out) const;

    std::array<int32_t, 256> byte_tokens_{};  // -1 when the vocabulary lacks the byte
};

// WordPiece (tokenizer.ggml.model = "bert"), with the semantics of Hugging Face tokenizers'
// BertNormalizer (clean text, CJK split, NFD, accents stripped, lowercase), BertPreTokenizer
// (whitespace and punctuation) and WordPiece (greedy longest match, "##" continuations). The
// vocabulary is llama.cpp's "phantom space" form: word-initial pieces are stored as U+2581 + piece,
// continuation pieces without their "##", control tokens unchanged.
class WordPieceTokenizer : public VocabTokenizer {
public:
    explicit WordPieceTokenizer(const TokenizerSpec& spec);

    // add_special: [CLS] text [SEP] (BOS and SEP ids, as llama.cpp does for BERT whatever the
    // add_bos/add_eos flags say).
    std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special) const override;

protected:
    void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const override;
    std::string normal_piece(int32_t id) const override { return unescape_spaces(vocab_.text(id)); }

private:
    // Appends the ids of one pre-tokenized word (code points, already normalised).
    void encode_word(const std::vector<uint32_t>& word, std::vector<int32_t>& out) const;

    size_t max_token_bytes_ = 0;  // longest vocabulary entry: bounds the match lengths tried
};

}  // namespace cactus
