#pragma once
// How the hidden states of a text's tokens become one vector (llama.cpp's pooling types), and the
// file's choice (<arch>.pooling_type). Pooling itself is the embedder's (engine/embedding.h).
#include <cstdint>
#include <optional>

namespace cactus {

enum class Pooling {
    NONE,  // no pooling: one vector per token (never normalised)
    MEAN,  // average over the tokens (sentence-transformers MiniLM, Cactus's decoder embeddings)
    CLS,   // the first token ([CLS]: bge, arctic)
    LAST,  // the last token (decoder embedders: Qwen3-Embedding, e5-mistral)
};

// llama.cpp's numbering of <arch>.pooling_type: 0 none, 1 mean, 2 cls, 3 last; nullopt for any
// other value (4 rank needs a classifier head, which no loaded model has).
inline std::optional<Pooling> pooling_from_type(uint64_t type) {
    switch (type) {
        case 0:
            return Pooling::NONE;
        case 1:
            return Pooling::MEAN;
        case 2:
            return Pooling::CLS;
        case 3:
            return Pooling::LAST;
        default:
            return std::nullopt;
    }
}

}  // namespace cactus
