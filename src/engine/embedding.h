#pragma once
// Text embeddings: one vector per text, from an encoder (BERT family: src/models/bert.h) or from a
// decoder's final hidden states. TextEmbedder::embed() does what is common to both: tokenize,
// check or truncate the length, batch several texts into one forward, pool, normalise. A model
// only supplies the hidden states of token sequences.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/pooling.h"

namespace cactus {

class Engine;
class Tokenizer;

// "none", "mean", "cls", "last"; throws cactus::Error naming the value otherwise.
Pooling parse_pooling(const std::string& name);
const char* pooling_name(Pooling pooling);

struct EmbedOptions {
    std::optional<Pooling> pooling;  // unset: the model's (GGUF <arch>.pooling_type; decoders: mean)
    bool normalize = true;           // unit L2 length (Pooling::NONE is never normalised)
    // A text longer than the model takes (max_tokens(), special tokens included): cut to fit (its
    // last special token kept) when true, else a cactus::Error naming the text's index and length.
    bool truncate = true;
};

// One text's embedding: rows = 1 when pooled; rows = its tokens with Pooling::NONE.
struct Embedding {
    size_t rows = 0;
    size_t dim = 0;
    std::vector<float> values;  // [rows, dim]
    size_t n_tokens = 0;        // tokens the model read (after any truncation)
};

class TextEmbedder {
public:
    virtual ~TextEmbedder() = default;

    // Loads an encoder-only model file (architecture "bert"); throws cactus::Error for others.
    // n_threads: 0 = the default.
    static std::unique_ptr<TextEmbedder> load_encoder(const std::string& path, int n_threads = 0);
    // Whether the GGUF at `path` holds an encoder-only architecture (what load_encoder takes).
    static bool is_encoder_file(const std::string& path);
    // The same for a general.architecture already read.
    static bool is_encoder_architecture(const std::string& arch);
    // Embeddings from a decoder's final hidden states (after the output norm). They share the
    // engine's model: embedding forgets the engine's cached conversation (the next completion
    // recomputes its prompt).
    static std::unique_ptr<TextEmbedder> over_decoder(Engine& engine);

    virtual size_t dim() const = 0;
    // Most tokens one text may have, special tokens included (encoders: their positions; decoders:
    // their context).
    virtual size_t max_tokens() const = 0;
    virtual Pooling default_pooling() const = 0;
    virtual const Tokenizer& tokenizer() const = 0;
    // A short description for logs and responses ("bert all-MiniLM-L6-v2").
    virtual std::string name() const = 0;

    // The token ids the model reads for a text (special tokens added as the model wants).
    virtual std::vector<int32_t> tokenize(const std::string& text) const;
    // Embeds every text; several texts go through the model together (hidden_states batches).
    // Throws cactus::Error for an empty text or one too long when options.truncate is false.
    std::vector<Embedding> embed(const std::vector<std::string>& texts, const EmbedOptions& options);
    // The same for texts already tokenized (ids < vocab size; not empty).
    std::vector<Embedding> embed_tokens(const std::vector<std::vector<int32_t>>& seqs, const EmbedOptions& options);

protected:
    // The hidden states of each sequence's tokens: (*out)[i] = [seqs[i].size(), dim()]. Every
    // sequence is non-empty and at most max_tokens() long.
    virtual void hidden_states(const std::vector<std::vector<int32_t>>& seqs, std::vector<std::vector<float>>* out) = 0;
};

// Pools hidden [n, dim] into one vector (MEAN, CLS, LAST), or copies every row (NONE).
std::vector<float> pool_hidden(const float* hidden, size_t n, size_t dim, Pooling pooling);
// Scales v to unit L2 length (a zero vector stays zero).
void l2_normalize(std::vector<float>* v);

}  // namespace cactus
