#include "engine/corpus_embedder.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace cactus {

CorpusEmbedder corpus_embedder(TextEmbedder& model) {
    CorpusEmbedder e;
    // The cache key: another model, pooling or width rebuilds the index.
    e.id = model.name() + " pooling=" + pooling_name(model.default_pooling()) + " dim=" + std::to_string(model.dim());
    e.dim = model.dim();
    const Tokenizer& tok = model.tokenizer();
    e.count_tokens = [&tok](const std::string& text) { return tok.encode(text, false, false).size(); };
    e.split_tokens = [&tok](const std::string& text, size_t max_tokens, size_t overlap) {
        const std::vector<int32_t> ids = tok.encode(text, false, false);
        const size_t stride = max_tokens > overlap ? max_tokens - overlap : max_tokens;
        std::vector<std::string> windows;
        for (size_t begin = 0; begin < ids.size(); begin += stride) {
            const size_t end = std::min(ids.size(), begin + max_tokens);
            windows.push_back(tok.decode(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                                                              ids.begin() + static_cast<std::ptrdiff_t>(end))));
            if (end == ids.size()) break;
        }
        return windows;
    };
    e.embed = [&model](const std::vector<std::string>& texts) {
        std::vector<std::vector<float>> out;
        out.reserve(texts.size());
        for (Embedding& v : model.embed(texts, EmbedOptions())) out.push_back(std::move(v.values));
        return out;
    };
    return e;
}

}  // namespace cactus
