#pragma once
// Pre-tokenizer of byte-level BPE: splits text into words with the regexes that
// tokenizer.ggml.pre names (as llama.cpp's llm_tokenizer_bpe defines them), using PCRE2 in UTF +
// UCP mode. Each regex splits every piece the previous one produced; matches and the text
// between matches both become pieces.
#include <memory>
#include <string>
#include <vector>

namespace cactus {

struct PreTokenizerConfig {
    std::vector<std::string> regexes;  // applied in order
    bool clean_spaces = true;          // detokenizer removes " ," style spaces (llama.cpp)
    bool ignore_merges = false;        // a word that is a token is emitted whole
    bool add_bos = false;              // default for add_bos_token
};

// Throws cactus::Error for a name llama.cpp does not know either.
PreTokenizerConfig pre_tokenizer_config(const std::string& name);

class PreTokenizer {
public:
    explicit PreTokenizer(const std::vector<std::string>& regexes);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // `text` must be valid UTF-8 (see utf8::sanitize). Returns the words in order; their
    // concatenation is `text`.
    std::vector<std::string> split(const std::string& text) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace cactus
