#pragma once
// The accept/reject rule of speculative sampling (Leviathan et al. 2023, "Fast Inference from
// Transformers via Speculative Decoding"; Chen et al. 2023) for drafts chosen deterministically
// (prompt lookup, a greedy draft model): the draft distribution q is one-hot on the drafted token
// x, so x is kept with probability min(1, p(x) / q(x)) = p(x), and when it is not, the token is
// drawn from max(0, p - q) renormalised: p without x. Each token then follows p exactly, whatever
// the drafter proposed. With greedy p (one-hot on the argmax) this keeps x iff it is the argmax.
#include <cstdint>

#include "sampling/sampler.h"

namespace cactus {

struct DraftVerdict {
    bool accepted = false;
    int32_t token = -1;  // x when accepted, else the replacement drawn from p without x
};

// Judges drafted token x against the model's distribution p, drawing from `sampler`'s generator.
DraftVerdict judge_draft(const TokenDistribution& p, int32_t x, Sampler& sampler);

}  // namespace cactus
