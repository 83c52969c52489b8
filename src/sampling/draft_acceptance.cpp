#include "sampling/draft_acceptance.h"

#include "core/error.h"

namespace cactus {

DraftVerdict judge_draft(const TokenDistribution& p, int32_t x, Sampler& sampler) {
    CACTUS_ASSERT(!p.ids.empty() && p.ids.size() == p.probs.size());
    DraftVerdict v;
    const double px = p.probability(x);
    if (px >= 1.0 || (px > 0.0 && sampler.uniform() < px)) {
        v.accepted = true;
        v.token = x;
        return v;
    }
    // The residual max(0, p - one_hot(x)) / (1 - p(x)): p with x removed (draw_from renormalises).
    TokenDistribution rest;
    rest.ids.reserve(p.ids.size());
    rest.probs.reserve(p.ids.size());
    for (size_t i = 0; i < p.ids.size(); ++i) {
        if (p.ids[i] == x || p.probs[i] <= 0.0) continue;
        rest.ids.push_back(p.ids[i]);
        rest.probs.push_back(p.probs[i]);
    }
    CACTUS_ASSERT(!rest.ids.empty());  // p(x) < 1, so another candidate has mass
    v.token = sampler.draw_from(rest);
    return v;
}

}  // namespace cactus
