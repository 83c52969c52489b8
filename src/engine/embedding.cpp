// What every embedder shares: tokenization, length checks, pooling and normalisation
// (engine/embedding.h). The model-specific part is hidden_states().
#include "engine/embedding.h"

#include <cmath>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

Pooling parse_pooling(const std::string& name) {
    if (name == "none") return Pooling::NONE;
    if (name == "mean") return Pooling::MEAN;
    if (name == "cls") return Pooling::CLS;
    if (name == "last") return Pooling::LAST;
    fail("pooling '%s' is not one of none, mean, cls, last", name.c_str());
}

const char* pooling_name(Pooling pooling) {
    switch (pooling) {
        case Pooling::NONE:
            return "none";
        case Pooling::MEAN:
            return "mean";
        case Pooling::CLS:
            return "cls";
        case Pooling::LAST:
            return "last";
    }
    return "?";
}

std::vector<float> pool_hidden(const float* hidden, size_t n, size_t dim, Pooling pooling) {
    CACTUS_ASSERT(n > 0);
    switch (pooling) {
        case Pooling::NONE:
            return std::vector<float>(hidden, hidden + n * dim);
        case Pooling::CLS:
            return std::vector<float>(hidden, hidden + dim);
        case Pooling::LAST:
            return std::vector<float>(hidden + (n - 1) * dim, hidden + n * dim);
        case Pooling::MEAN:
            break;
    }
    // Summed in double: a 512-token mean in float loses ~1e-5 relative, the oracle's tolerance.
    std::vector<double> sum(dim, 0.0);
    for (size_t t = 0; t < n; ++t)
        for (size_t j = 0; j < dim; ++j) sum[j] += hidden[t * dim + j];
    std::vector<float> mean(dim);
    for (size_t j = 0; j < dim; ++j) mean[j] = static_cast<float>(sum[j] / static_cast<double>(n));
    return mean;
}

void l2_normalize(std::vector<float>* v) {
    double ss = 0.0;
    for (float x : *v) ss += static_cast<double>(x) * x;
    if (ss <= 0.0) return;
    const double inv = 1.0 / std::sqrt(ss);
    for (float& x : *v) x = static_cast<float>(x * inv);
}

std::vector<int32_t> TextEmbedder::tokenize(const std::string& text) const {
    return tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/false);
}

namespace {

// Cuts ids to `max` tokens, keeping a final special token (BERT's [SEP], a decoder's EOS) that the
// model is trained to see at the end.
void truncate_ids(std::vector<int32_t>* ids, size_t max, const Tokenizer& tok) {
    const int32_t last = ids->back();
    const bool keep_last = tok.is_control(last) && max >= 2;
    ids->resize(keep_last ? max - 1 : max);
    if (keep_last) ids->push_back(last);
}

}  // namespace

std::vector<Embedding> TextEmbedder::embed(const std::vector<std::string>& texts, const EmbedOptions& options) {
    std::vector<std::vector<int32_t>> seqs;
    seqs.reserve(texts.size());
    const size_t max = max_tokens();
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) fail("embed: text %zu is empty", i);
        std::vector<int32_t> ids = tokenize(texts[i]);
        if (ids.empty()) fail("embed: text %zu gives no tokens", i);
        if (ids.size() > max) {
            if (!options.truncate)
                fail("embed: text %zu has %zu tokens; the model takes at most %zu (truncate cuts it to fit)", i,
                     ids.size(), max);
            truncate_ids(&ids, max, tokenizer());
        }
        seqs.push_back(std::move(ids));
    }
    return embed_tokens(seqs, options);
}

std::vector<Embedding> TextEmbedder::embed_tokens(const std::vector<std::vector<int32_t>>& seqs,
                                                  const EmbedOptions& options) {
    const size_t n_vocab = tokenizer().vocab_size();
    for (size_t i = 0; i < seqs.size(); ++i) {
        if (seqs[i].empty()) fail("embed: input %zu has no tokens", i);
        if (seqs[i].size() > max_tokens())
            fail("embed: input %zu has %zu tokens; the model takes at most %zu", i, seqs[i].size(), max_tokens());
        for (int32_t id : seqs[i])
            if (id < 0 || static_cast<size_t>(id) >= n_vocab)
                fail("embed: input %zu holds token id %d, outside the vocabulary (%zu)", i, id, n_vocab);
    }
    std::vector<std::vector<float>> hidden;
    if (!seqs.empty()) hidden_states(seqs, &hidden);
    CACTUS_ASSERT(hidden.size() == seqs.size());
    const Pooling pooling = options.pooling.value_or(default_pooling());
    const size_t d = dim();
    std::vector<Embedding> out(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
        CACTUS_ASSERT(hidden[i].size() == seqs[i].size() * d);
        Embedding& e = out[i];
        e.dim = d;
        e.n_tokens = seqs[i].size();
        e.rows = pooling == Pooling::NONE ? seqs[i].size() : 1;
        e.values = pool_hidden(hidden[i].data(), seqs[i].size(), d, pooling);
        if (options.normalize && pooling != Pooling::NONE) l2_normalize(&e.values);
    }
    return out;
}

}  // namespace cactus
