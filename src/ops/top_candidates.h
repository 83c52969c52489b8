#pragma once
// The few numbers of a logit row that sampling usually needs, instead of the row (a 262k vocabulary
// is 1 MiB a token): its k largest logits (Backend::top_k) with the row's maximum and softmax
// normalizer. Sampler::sample_from_top draws from them when that gives exactly sample()'s token.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cactus {

struct TopCandidates {
    std::vector<int32_t> ids;   // [k] ids of the k largest logits, descending; equal logits lower id first
    std::vector<float> logits;  // [k] their logits
    float max_logit = 0.0f;     // the row's maximum as argmax finds it (NaN when logits[0] is NaN)
    double sum_exp = 0.0;       // sum over the row of exp(logit - max_logit); NaN when max_logit is not finite
    size_t n_vocab = 0;         // the row's length
    // The ids whose logits were -inf'd before these were taken (TopBans::ids), or null: a sampler
    // banning exactly these (Sampler::set_banned, the same list) can draw from them.
    const std::vector<int32_t>* banned = nullptr;
};

// Bans applied where the candidates are taken (Model::decode_top): in each row that asks, the
// logits of `ids` become -inf first, as Sampler::set_banned makes them on the host, so the
// candidates, maximum and normalizer are those of the banned row.
struct TopBans {
    const std::vector<int32_t>* ids = nullptr;  // one list for every asking row; ids outside the vocabulary are ignored
    std::vector<uint8_t> rows;                  // [n_marked] 1: the row bans them; empty: every row does
};

// The candidates of a host row as the CPU backend's top_k computes them, the normalizer kept in
// double exactly as the sampler sums it (sum_exp_below): tests and hosts without a device.
// 1 <= k <= min(kTopKMax, n_vocab).
void top_candidates_of(const float* logits, size_t n_vocab, size_t k, TopCandidates* out);

}  // namespace cactus
