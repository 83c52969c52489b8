#include "ops/top_candidates.h"

#include <cmath>

#include "core/error.h"
#include "ops/exp_sum.h"
#include "ops/ops_ref.h"

namespace cactus {

void top_candidates_of(const float* logits, size_t n_vocab, size_t k, TopCandidates* out) {
    if (k < 1 || k > kTopKMax || k > n_vocab) fail("top_candidates_of: k = %zu with %zu logits", k, n_vocab);
    out->ids.resize(k);
    out->logits.resize(k);
    float stats[2];
    top_k_row_ref(out->ids.data(), out->logits.data(), stats, logits, n_vocab, k);
    out->max_logit = stats[0];
    out->sum_exp = std::isfinite(stats[0]) ? sum_exp_below(logits, n_vocab, stats[0]) : NAN;
    out->n_vocab = n_vocab;
}

}  // namespace cactus
