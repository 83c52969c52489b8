#include "sampling/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "sampling/grammar.h"

namespace cactus {

namespace {

void validate(const SamplingParams& p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
        fail("sampler: temperature must be >= 0 (got %g)", p.temperature);
    if (p.top_k < 0) fail("sampler: top_k must be >= 0 (got %d)", p.top_k);
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail("sampler: top_p must be in (0, 1] (got %g)", p.top_p);
    if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) fail("sampler: min_p must be in [0, 1) (got %g)", p.min_p);
    if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
        fail("sampler: repetition_penalty must be > 0 (got %g)", p.repetition_penalty);
}

uint64_t seed_from(const SamplingParams& p) {
    if (p.seed != 0) return p.seed;
    return static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
}

void sort_descending(std::vector<TokenCandidate>& c) {
    std::sort(c.begin(), c.end(), [](const TokenCandidate& a, const TokenCandidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
}

}  // namespace

int32_t argmax(const std::vector<float>& logits) {
    CACTUS_ASSERT(!logits.empty());
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return static_cast<int32_t>(best);
}

void softmax_candidates(std::vector<TokenCandidate>& c, std::vector<float>& probs) {
    probs.resize(c.size());
    if (c.empty()) return;
    float max_logit = c[0].logit;
    for (const TokenCandidate& t : c) max_logit = std::max(max_logit, t.logit);
    double sum = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        probs[i] = std::exp(c[i].logit - max_logit);
        sum += probs[i];
    }
    for (float& p : probs) p = static_cast<float>(p / sum);
}

void keep_top_k(std::vector<TokenCandidate>& c, int k) {
    if (k <= 0 || static_cast<size_t>(k) >= c.size()) {
        sort_descending(c);
        return;
    }
    std::partial_sort(c.begin(), c.begin() + k, c.end(), [](const TokenCandidate& a, const TokenCandidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
    c.resize(static_cast<size_t>(k));
}

void keep_top_p(std::vector<TokenCandidate>& c, float p) {
    if (p >= 1.0f || c.size() <= 1) return;
    std::vector<float> probs;
    softmax_candidates(c, probs);  // c is sorted descending by keep_top_k
    double cumulative = 0.0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
        cumulative += probs[i];
        if (cumulative >= p) {
            keep = i + 1;
            break;
        }
    }
    c.resize(keep);
}

void keep_min_p(std::vector<TokenCandidate>& c, float min_p) {
    if (min_p <= 0.0f || c.size() <= 1) return;
    // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
    const float threshold = c[0].logit + std::log(min_p);
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= threshold) ++keep;
    c.resize(keep);
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
    validate(params_);
    rng_.seed(seed_from(params_));
}

void Sampler::accept(int32_t token) {
    if (params_.repetition_window <= 0) return;
    history_.push_back(token);
    while (history_.size() > static_cast<size_t>(params_.repetition_window)) history_.pop_front();
}

void Sampler::apply_repetition_penalty(std::vector<float>& logits) const {
    if (params_.repetition_penalty == 1.0f) return;
    std::vector<int32_t> seen(history_.begin(), history_.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
        if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
        float& l = logits[static_cast<size_t>(id)];
        l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
}

int32_t Sampler::sample(std::vector<float>& logits) {
    CACTUS_ASSERT(!logits.empty());
    apply_repetition_penalty(logits);
    using Clock = std::chrono::steady_clock;
    auto ms_since = [](Clock::time_point t) {
        return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    };
    if (constraint_ != nullptr) {
        Clock::time_point t = Clock::now();
        constraint_->mask(logits);
        constraint_ms_ += ms_since(t);
    }
    float max_logit = logits[static_cast<size_t>(argmax(logits))];
    if (constraint_ != nullptr && !std::isfinite(max_logit))
        fail("sampler: the grammar allows no next token (the constraint is unsatisfiable here)");
    double denom = 0.0;
    for (float l : logits) denom += std::exp(static_cast<double>(l - max_logit));

    int32_t chosen;
    if (params_.temperature == 0.0f) {
        chosen = argmax(logits);
    } else {
        candidates_.clear();
        candidates_.reserve(logits.size());
        for (size_t i = 0; i < logits.size(); ++i) candidates_.push_back({static_cast<int32_t>(i), logits[i]});
        keep_top_k(candidates_, params_.top_k);
        keep_top_p(candidates_, params_.top_p);
        keep_min_p(candidates_, params_.min_p);
        for (TokenCandidate& t : candidates_) t.logit /= params_.temperature;
        std::vector<float> probs;
        softmax_candidates(candidates_, probs);
        std::discrete_distribution<size_t> pick(probs.begin(), probs.end());
        chosen = candidates_[pick(rng_)].id;
    }
    if (constraint_ != nullptr) {
        Clock::time_point t = Clock::now();
        if (!constraint_->accept(chosen)) fail("sampler: the grammar rejected token %d that its mask allowed", chosen);
        constraint_ms_ += ms_since(t);
    }
    last_probability_ =
        static_cast<float>(std::exp(static_cast<double>(logits[static_cast<size_t>(chosen)] - max_logit)) / denom);
    return chosen;
}

}  // namespace cactus
