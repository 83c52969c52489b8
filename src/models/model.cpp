#include "models/model.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

void Model::decode_top(const Batch&, size_t, std::vector<TopCandidates>*, const TopBans*) {
    fail("Model::decode_top: %s has no device sampling", info().architecture.c_str());
}

void Model::last_logits(std::vector<float>*) {
    fail("Model::last_logits: %s has no device sampling", info().architecture.c_str());
}

void Model::forward(const int32_t* tokens, size_t n, std::vector<float>* logits, std::vector<float>* all_logits,
                    int seq) {
    if (n == 0) fail("Model::forward: no tokens");
    if (!tokens) fail("Model::forward: tokens is null");
    const size_t n_vocab = info().n_vocab;
    if (n > context_room(seq)) {
        fail("Model::forward: %zu tokens after %zu exceed the context of %zu tokens (kv_compress is off)", n,
             n_past(seq), info().n_ctx);
    }
    for (size_t t = 0; t < n; ++t) {  // every id is checked before any step changes the cache
        if (tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= n_vocab) {
            fail("Model::forward: token id %d is outside the vocabulary of %zu", tokens[t], n_vocab);
        }
    }
    if (all_logits) all_logits->assign(n * n_vocab, 0.0f);
    if (logits) logits->assign(n_vocab, 0.0f);
    std::vector<int32_t> seqs;
    std::vector<uint8_t> marks;
    std::vector<float> step_logits;
    for (size_t done = 0; done < n;) {
        // The cache may compact here and may take fewer tokens (sliding rings, compaction).
        const size_t chunk = reserve(std::min(n_batch(), n - done), seq);
        const bool last = done + chunk == n;
        seqs.assign(chunk, seq);
        marks.assign(chunk, all_logits ? 1 : 0);
        if (last && logits) marks.back() = 1;
        Batch batch;
        batch.n = chunk;
        batch.tokens = tokens + done;
        batch.seq = seqs.data();
        batch.logits = marks.data();
        decode(batch, &step_logits);
        if (all_logits) std::copy(step_logits.begin(), step_logits.end(), all_logits->begin() + done * n_vocab);
        done += chunk;
    }
    if (logits) std::copy(step_logits.end() - static_cast<std::ptrdiff_t>(n_vocab), step_logits.end(), logits->begin());
}

void Model::forward_top(int32_t token, size_t k, TopCandidates* out, const std::vector<int32_t>* banned, int seq) {
    if (context_room(seq) < 1)
        fail("Model::forward: 1 token after %zu exceeds the context of %zu tokens (kv_compress is off)", n_past(seq),
             info().n_ctx);
    if (token < 0 || static_cast<size_t>(token) >= info().n_vocab)
        fail("Model::forward: token id %d is outside the vocabulary of %zu", token, info().n_vocab);
    reserve(1, seq);  // the cache may compact here
    const uint8_t mark = 1;
    Batch batch;
    batch.n = 1;
    batch.tokens = &token;
    batch.seq = &seq;
    batch.logits = &mark;
    TopBans bans;
    bans.ids = banned;
    std::vector<TopCandidates> tops;
    decode_top(batch, k, &tops, banned != nullptr ? &bans : nullptr);
    CACTUS_ASSERT(tops.size() == 1);
    *out = std::move(tops[0]);
}

}  // namespace cactus
