#pragma once
// The concrete tokenizers behind Tokenizer: a shared vocabulary-based base, GPT-2 byte-level BPE
// and SentencePiece BPE. Internal to src/tokenizer (tests may include it).
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {

class VocabTokenizer : public Tokenizer {
public:
    VocabTokenizer(const TokenizerSpec& spec, VocabKind kind);

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

// GPT-2 style byte-level BPE: pre-tokenizer regexes, bytes mapped to printable code points,
// merges applied lowest rank first (llama.cpp's llm_tokenizer_bpe_session).
class BpeTokenizer : public VocabTokenizer {
public:
    explicit BpeTokenizer(const TokenizerSpec& spec);

protected:
    void encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const override;
    std::string normal_piece(int32_t id) const override;

private:
    void encode_word(const std::string& word, std::vector<int32_t>& out) const;
    int rank(const std::string& left, const std::string& right) const;  // -1 when no merge

    PreTokenizerConfig config_;
    PreTokenizer pre_tokenizer_;
    std::unordered_map<std::string, int> ranks_;  // key: merge_key(left, right)
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

}  // namespace cactus
