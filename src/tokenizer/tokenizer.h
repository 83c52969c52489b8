#pragma once
// Text <-> token ids, built from GGUF metadata (tokenizer.ggml.*): GPT-2 byte-level BPE with the
// pre-tokenizer that tokenizer.ggml.pre names, SentencePiece BPE with byte fallback, and gemma4's
// SentencePiece-style BPE (ranked merges over raw UTF-8, spaces as U+2581, <0xXX> byte fallback),
// and BERT's WordPiece.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cactus {

class GgufFile;
struct TokenizerSpec;  // tokenizer/vocab.h

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Builds the tokenizer the file's tokenizer.ggml.model names; throws cactus::Error otherwise.
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
    // Builds a tokenizer from metadata already read (tests build small vocabularies this way).
    static std::unique_ptr<Tokenizer> from_spec(const TokenizerSpec& spec);

    // add_special: prepend BOS / append EOS as the file's add_bos/add_eos flags say.
    // parse_special: text matching a special/control token's text becomes that token.
    virtual std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special) const = 0;

    // The raw bytes a token stands for (may be part of a UTF-8 character). Control tokens give
    // their text only when `render_special` is true.
    virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
    // The text of `ids`, as llama.cpp's llama_detokenize(remove_special = false) gives it: the
    // pieces joined, the prefix space dropped where the model adds one, and, for pre-tokenizers
    // that ask for it, spaces before punctuation cleaned up. Invalid UTF-8 is kept as is.
    // WordPiece also drops the text's leading space, which llama.cpp keeps ("hello", not " hello").
    std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

    virtual size_t vocab_size() const = 0;
    virtual const std::string& token_text(int32_t id) const = 0;  // the vocab entry as stored
    virtual bool is_control(int32_t id) const = 0;                // control / special tokens

    int32_t bos_id() const { return bos_id_; }  // -1 when the model has none
    int32_t eos_id() const { return eos_id_; }
    int32_t eot_id() const { return eot_id_; }  // end of turn (<|im_end|>, <end_of_turn>), or -1
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // Tokens that end generation: EOS, EOT and any end-of-turn tokens named in the metadata
    // (for example <|im_end|>, <end_of_turn>).
    const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
    bool is_end_of_generation(int32_t id) const;

protected:
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    int32_t eot_id_ = -1;
    bool decode_strips_prefix_space_ = false;  // SentencePiece models that add a prefix space
    // WordPiece: every word-initial piece starts with a space, so the text's first one is dropped
    // (also after a [CLS] that renders as nothing).
    bool decode_strips_leading_space_ = false;
    bool decode_cleans_spaces_ = false;  // llama.cpp's clean_spaces
    bool add_bos_ = false;
    bool add_eos_ = false;
    std::vector<int32_t> eog_ids_;
};

// Turns a stream of token ids into text pieces that are always whole UTF-8 characters: bytes of
// an incomplete character are held back until the rest arrives (or flush() is called).
class StreamingDetokenizer {
public:
    // render_special: control tokens produce their text (otherwise nothing).
    explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = false)
        : tokenizer_(tokenizer), render_special_(render_special) {}
    // Text that is complete so far (may be empty). Always valid UTF-8: bytes that can never form
    // a character become U+FFFD at once; an incomplete character at the end is held back.
    std::string push(int32_t id);
    std::string push_bytes(const std::string& bytes);  // the same for raw bytes
    std::string flush();                               // whatever is left, invalid bytes replaced by U+FFFD
    void reset() { pending_.clear(); }
    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer& tokenizer_;
    bool render_special_ = false;
    std::string pending_;
};

}  // namespace cactus
