#pragma once
// Pre-tokenizer of BPE: splits text into words with the regexes that tokenizer.ggml.pre names (as
// llama.cpp's llm_tokenizer_bpe defines them), using PCRE2 in UTF + UCP mode. Each regex splits
// every piece the previous one produced; matches and the text between matches both become
// pieces. The newline-run pattern of SentencePiece-style BPE (gemma4) is split by hand, as
// llama.cpp's unicode_regex_split_custom does, so it also takes text that is not valid UTF-8.
#include <memory>
#include <string>
#include <vector>

namespace cactus {

// Splits text into runs of '\n' and runs of anything else.
extern const char* const kNewlineRunsRegex;

struct PreTokenizerConfig {
    std::vector<std::string> regexes;  // applied in order
    bool clean_spaces = true;          // detokenizer removes " ," style spaces (llama.cpp)
    bool ignore_merges = false;        // a word that is a token is emitted whole
    bool add_bos = false;              // default for add_bos_token
    // SentencePiece-style BPE (gemma4) instead of GPT-2 byte-level BPE: merges run on the raw
    // UTF-8 of the text (no byte -> code point mapping), spaces are written as U+2581 first, and a
    // byte without a token of its own falls back to its <0xXX> token.
    bool byte_encode = true;
    bool escape_whitespaces = false;
    bool whole_newline_runs = false;  // a run of '\n' that is a token skips the merges
    bool force_add_bos = false;       // BOS is added even where add_bos_token says false
};

// Throws cactus::Error for a name llama.cpp does not know either.
PreTokenizerConfig pre_tokenizer_config(const std::string& name);

class PreTokenizer {
public:
    explicit PreTokenizer(const std::vector<std::string>& regexes);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // `text` must be valid UTF-8 (see utf8::sanitize) unless every regex is kNewlineRunsRegex.
    // Returns the words in order; their concatenation is `text`.
    std::vector<std::string> split(const std::string& text) const;
    // The same split as the end offset of each word, in order (none empty; the last is the size).
    std::vector<size_t> split_ends(const std::string& text) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace cactus
