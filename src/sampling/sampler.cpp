#include "sampling/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/exp_sum.h"
#include "ops/ops_ref.h"
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
    if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
        fail("sampler: presence_penalty and frequency_penalty must be finite (got %g, %g)", p.presence_penalty,
             p.frequency_penalty);
    for (const auto& [id, bias] : p.logit_bias) {
        if (id < 0) fail("sampler: logit_bias token id must be >= 0 (got %d)", id);
        if (std::isnan(bias) || bias == INFINITY) fail("sampler: logit_bias for token %d must be finite or -inf", id);
    }
}

const std::vector<SamplerStep>& default_order() {
    static const std::vector<SamplerStep> order = {SamplerStep::penalties, SamplerStep::top_k, SamplerStep::top_p,
                                                   SamplerStep::min_p, SamplerStep::temperature};
    return order;
}

bool truncates(SamplerStep s) { return s == SamplerStep::top_k || s == SamplerStep::top_p || s == SamplerStep::min_p; }

const std::vector<SamplerStep>& chain_order(const SamplingParams& p) {
    return p.order.empty() ? default_order() : p.order;
}

// One past the chain's last truncating step (0: none): temperature from there on is the draw's.
size_t last_truncation_of(const std::vector<SamplerStep>& order) {
    size_t last = 0;
    for (size_t i = 0; i < order.size(); ++i)
        if (truncates(order[i])) last = i + 1;
    return last;
}

bool runs(const SamplingParams& p, SamplerStep step) {
    const std::vector<SamplerStep>& order = chain_order(p);
    return std::find(order.begin(), order.end(), step) != order.end();
}

bool penalizes(const SamplingParams& p) {
    return runs(p, SamplerStep::penalties) &&
           (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
}

// How far a device's softmax normalizer may be from the sampler's own sum over the same row (f32
// exponentials in another order, the terms below the tail floor that chain_candidates leaves out:
// each < e^-27.6, ~3e-7 of the sum at 262144 logits): a wide margin, so a nucleus that ends this
// close to top_p is left to sample().
constexpr double kNormalizerSlack = 1e-4;

uint64_t seed_from(const SamplingParams& p) {
    if (p.seed != 0) return p.seed;
    return static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
}

// Candidates whose probability is below e^-kTailLogits (about 1e-12) of the most likely token's,
// at temperature 1 and at the sampling temperature, are left out before sorting: they cannot be
// drawn in practice, and sorting all of a 50k-256k vocabulary cost ~15 ms per token.
constexpr float kTailLogits = 27.6f;

// The lowest logit chain_candidates keeps (one function: sample_from_top must draw the same line).
float tail_floor(float max_logit, float temperature) { return max_logit - std::max(1.0f, temperature) * kTailLogits; }

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

void keep_top_k(std::vector<TokenCandidate>& c, int k) {
    if (k <= 0 || static_cast<size_t>(k) >= c.size()) {
        sort_descending(c);
        return;
    }
    const auto larger = [](const TokenCandidate& a, const TokenCandidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    // Selection in linear time, then only the k sorted (a heap over the whole vocabulary cost ~1 ms).
    std::nth_element(c.begin(), c.begin() + (k - 1), c.end(), larger);
    c.resize(static_cast<size_t>(k));
    std::sort(c.begin(), c.end(), larger);
}

void keep_top_p(std::vector<TokenCandidate>& c, float p) {
    if (p >= 1.0f || c.size() <= 1) return;
    // Probabilities over all of c, then the largest candidates sorted a few at a time (64, 256, ...)
    // until their cumulative probability reaches p: a 50k-256k vocabulary is rarely sorted whole.
    float max_logit = c[0].logit;
    for (const TokenCandidate& t : c) max_logit = std::max(max_logit, t.logit);
    double total = 0.0;
    for (const TokenCandidate& t : c) total += static_cast<double>(exp_nonpositive(t.logit - max_logit));
    const auto larger = [](const TokenCandidate& a, const TokenCandidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    double cumulative = 0.0;
    size_t sorted = 0;
    for (size_t want = 64;; want *= 4) {
        want = std::min(want, c.size());
        std::partial_sort(c.begin() + std::ptrdiff_t(sorted), c.begin() + std::ptrdiff_t(want), c.end(), larger);
        for (size_t i = sorted; i < want; ++i) {
            cumulative += static_cast<double>(exp_nonpositive(c[i].logit - max_logit)) / total;
            if (cumulative >= p) {
                c.resize(i + 1);
                return;
            }
        }
        sorted = want;
        if (want == c.size()) return;
    }
}

void keep_min_p(std::vector<TokenCandidate>& c, float min_p) {
    if (min_p <= 0.0f || c.size() <= 1) return;
    // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
    // (c in any order; the kept ones keep theirs)
    float max_logit = c[0].logit;
    for (const TokenCandidate& t : c) max_logit = std::max(max_logit, t.logit);
    const float threshold = max_logit + std::log(min_p);
    c.erase(std::remove_if(c.begin(), c.end(), [&](const TokenCandidate& t) { return !(t.logit >= threshold); }),
            c.end());
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

void Sampler::apply_logit_bias(std::vector<float>& logits) const {
    for (const auto& [id, bias] : params_.logit_bias)
        if (static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] += bias;
}

// llama.cpp's penalties: the repetition penalty divides a positive logit (multiplies a negative
// one), then OpenAI's frequency and presence penalties subtract, for each token of the window.
void Sampler::apply_penalties(std::vector<float>& logits) const {
    const SamplingParams& p = params_;
    if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
    std::vector<int32_t> seen(history_.begin(), history_.end());
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size();) {
        size_t j = i;
        while (j < seen.size() && seen[j] == seen[i]) ++j;
        const int32_t id = seen[i];
        const auto count = static_cast<float>(j - i);
        i = j;
        if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
        float& l = logits[static_cast<size_t>(id)];
        if (p.repetition_penalty != 1.0f) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
        l -= count * p.frequency_penalty + p.presence_penalty;
    }
}

void Sampler::run_step(SamplerStep step, size_t i, size_t last_truncation, float* draw_temperature) {
    switch (step) {
        case SamplerStep::penalties:
            break;  // applied to the whole vocabulary before the candidates were taken
        case SamplerStep::top_k:
            if (params_.top_k > 0) keep_top_k(candidates_, params_.top_k);
            break;
        case SamplerStep::top_p:
            keep_top_p(candidates_, params_.top_p);
            break;
        case SamplerStep::min_p:
            keep_min_p(candidates_, params_.min_p);
            break;
        case SamplerStep::temperature:
            if (i >= last_truncation) {
                *draw_temperature = params_.temperature;
            } else {
                for (TokenCandidate& t : candidates_) t.logit /= params_.temperature;
            }
            break;
    }
}

float Sampler::run_chain() {
    const std::vector<SamplerStep>& order = chain_order(params_);
    // Temperature after the last truncation is left to the draw (the same numbers as scaling first).
    const size_t last_truncation = last_truncation_of(order);
    float draw_temperature = 1.0f;
    for (size_t i = 0; i < order.size(); ++i) run_step(order[i], i, last_truncation, &draw_temperature);
    return draw_temperature;
}

// A candidate drawn with probability exp((logit - max) / temperature) / sum: one uniform number
// scaled by the sum, then a scan (std::discrete_distribution builds and searches a table: ~2 ms
// per token over a 49k vocabulary).
int32_t Sampler::draw(const std::vector<TokenCandidate>& c, float temperature) {
    weights_.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) weights_[i] = c[i].logit;
    const float max_logit = *std::max_element(weights_.begin(), weights_.end());
    exp_map(weights_.data(), weights_.data(), weights_.size(), max_logit, 1.0f / temperature);
    const double total = sum_lanes(weights_.data(), weights_.size());
    const double target = std::uniform_real_distribution<double>(0.0, total)(rng_);
    double cumulative = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        cumulative += static_cast<double>(weights_[i]);
        if (target < cumulative) return c[i].id;
    }
    return c.back().id;  // target rounded up to total
}

double TokenDistribution::probability(int32_t id) const {
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == id) return probs[i];
    return 0.0;
}

void Sampler::adjust(std::vector<float>& logits) const {
    apply_logit_bias(logits);
    if (runs(params_, SamplerStep::penalties)) apply_penalties(logits);
    if (banned_ != nullptr)
        for (int32_t id : *banned_)
            if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = -INFINITY;
}

float Sampler::chain_candidates(const std::vector<float>& logits, float max_logit) {
    const float floor = tail_floor(max_logit, params_.temperature);
    candidates_.resize(logits.size());
    size_t kept = 0;
    for (size_t i = 0; i < logits.size(); ++i) {  // branch-free compaction
        candidates_[kept] = {static_cast<int32_t>(i), logits[i]};
        kept += logits[i] >= floor ? 1 : 0;
    }
    candidates_.resize(kept);
    if (candidates_.empty()) fail("sampler: no finite logit to sample from (NaN logits)");
    // Without truncation the draw needs no order (the sort of every candidate was ~15 ms).
    return run_chain();
}

int32_t Sampler::sample(std::vector<float>& logits) {
    CACTUS_ASSERT(!logits.empty());
    adjust(logits);
    using Clock = std::chrono::steady_clock;
    auto ms_since = [](Clock::time_point t) {
        return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    };
    if (constraint_ != nullptr) {
        Clock::time_point t = Clock::now();
        constraint_->mask(logits);
        constraint_ms_ += ms_since(t);
    }
    const int32_t best = argmax(logits);
    const float max_logit = logits[static_cast<size_t>(best)];
    if (constraint_ != nullptr && !std::isfinite(max_logit))
        fail("sampler: the grammar allows no next token (the constraint is unsatisfiable here)");
    const double denom = sum_exp_below(logits.data(), logits.size(), max_logit);

    int32_t chosen;
    if (params_.temperature == 0.0f) {
        chosen = best;
    } else {
        const float draw_temperature = chain_candidates(logits, max_logit);
        chosen = draw(candidates_, draw_temperature);
    }
    if (constraint_ != nullptr) {
        Clock::time_point t = Clock::now();
        if (!constraint_->accept(chosen)) fail("sampler: the grammar rejected token %d that its mask allowed", chosen);
        constraint_ms_ += ms_since(t);
    }
    last_probability_ = static_cast<float>(
        static_cast<double>(exp_nonpositive(logits[static_cast<size_t>(chosen)] - max_logit)) / denom);
    return chosen;
}

void Sampler::distribution(std::vector<float>& logits, TokenDistribution* out) {
    CACTUS_ASSERT(!logits.empty() && out != nullptr);
    if (constraint_ != nullptr) fail("sampler: distribution() is not available with a grammar constraint");
    adjust(logits);
    const int32_t best = argmax(logits);
    const float max_logit = logits[static_cast<size_t>(best)];
    dist_logits_ = &logits;
    dist_max_ = max_logit;
    dist_denom_ = sum_exp_below(logits.data(), logits.size(), max_logit);
    out->ids.clear();
    out->probs.clear();
    if (params_.temperature == 0.0f) {
        out->ids.push_back(best);
        out->probs.push_back(1.0);
        return;
    }
    // The same weights draw() computes: exp((logit - max) / temperature) over the chain's candidates.
    const float temperature = chain_candidates(logits, max_logit);
    weights_.resize(candidates_.size());
    for (size_t i = 0; i < candidates_.size(); ++i) weights_[i] = candidates_[i].logit;
    const float top = *std::max_element(weights_.begin(), weights_.end());
    exp_map(weights_.data(), weights_.data(), weights_.size(), top, 1.0f / temperature);
    const double total = sum_lanes(weights_.data(), weights_.size());
    out->ids.reserve(candidates_.size());
    out->probs.reserve(candidates_.size());
    for (size_t i = 0; i < candidates_.size(); ++i) {
        out->ids.push_back(candidates_[i].id);
        out->probs.push_back(static_cast<double>(weights_[i]) / total);
    }
}

void Sampler::note_chosen(int32_t id) {
    CACTUS_ASSERT(dist_logits_ != nullptr && id >= 0 && static_cast<size_t>(id) < dist_logits_->size());
    last_probability_ = static_cast<float>(
        static_cast<double>(exp_nonpositive((*dist_logits_)[static_cast<size_t>(id)] - dist_max_)) / dist_denom_);
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw_from(const TokenDistribution& d) {
    CACTUS_ASSERT(!d.ids.empty() && d.ids.size() == d.probs.size());
    double total = 0.0;
    for (double p : d.probs) total += p;
    const double target = std::uniform_real_distribution<double>(0.0, total)(rng_);
    double cumulative = 0.0;
    for (size_t i = 0; i < d.ids.size(); ++i) {
        cumulative += d.probs[i];
        if (target < cumulative) return d.ids[i];
    }
    return d.ids.back();  // target rounded up to total
}

size_t Sampler::top_candidates_wanted() const {
    const SamplingParams& p = params_;
    if (constraint_ != nullptr || !p.logit_bias.empty() || penalizes(p)) return 0;
    if (p.temperature == 0.0f) return 1;
    if (p.top_k > 0 && runs(p, SamplerStep::top_k))
        return static_cast<size_t>(p.top_k) <= kTopKMax ? static_cast<size_t>(p.top_k) : 0;
    if ((p.top_p < 1.0f && runs(p, SamplerStep::top_p)) || (p.min_p > 0.0f && runs(p, SamplerStep::min_p)))
        return kNucleusCandidates;
    return 0;  // the draw needs every logit
}

namespace {

// candidates_ = the first n of the list (sorted as keep_top_k and keep_top_p leave them).
void take_prefix(const TopCandidates& top, size_t n, std::vector<TokenCandidate>* c) {
    c->clear();
    for (size_t j = 0; j < n; ++j) c->push_back({top.ids[j], top.logits[j]});
}

void sort_by_id(std::vector<TokenCandidate>* c) {
    std::sort(c->begin(), c->end(), [](const TokenCandidate& a, const TokenCandidate& b) { return a.id < b.id; });
}

// How many of the list keep_top_p keeps over the whole row's candidates, or 0 when the normalizer's
// slack leaves it open or the nucleus reaches past the list. keep_top_p's cumulative sum is
// mass_j / total with the same terms; only total differs (kNormalizerSlack).
size_t nucleus_end(const TopCandidates& top, float top_p) {
    const double p = static_cast<double>(top_p);
    const double low_total = top.sum_exp * (1.0 - kNormalizerSlack);
    const double high_total = top.sum_exp * (1.0 + kNormalizerSlack);
    double mass = 0.0;
    for (size_t j = 0; j < top.ids.size(); ++j) {
        mass += static_cast<double>(exp_nonpositive(top.logits[j] - top.max_logit));
        if (mass / low_total < p) continue;  // below p whatever the exact total
        return mass / high_total >= p ? j + 1 : 0;
    }
    return 0;
}

}  // namespace

bool Sampler::chain_from_top(const TopCandidates& top, float* draw_temperature) {
    const size_t k = top.ids.size();
    const float max_logit = top.max_logit;
    const float floor = tail_floor(max_logit, params_.temperature);
    const std::vector<SamplerStep>& order = chain_order(params_);
    const size_t last_truncation = last_truncation_of(order);
    *draw_temperature = 1.0f;
    // The list holds every candidate chain_candidates() takes when it is the whole row or ends below
    // the floor: they are known exactly (in id order, as it takes them) and the chain runs as is.
    if (k == top.n_vocab || !(top.logits[k - 1] >= floor)) {
        candidates_.clear();
        for (size_t j = 0; j < k; ++j)
            if (top.logits[j] >= floor) candidates_.push_back({top.ids[j], top.logits[j]});
        sort_by_id(&candidates_);
        for (size_t i = 0; i < order.size(); ++i) run_step(order[i], i, last_truncation, draw_temperature);
        return true;
    }
    // Otherwise the candidates are every logit >= floor, the list their largest (all >= floor),
    // until a truncation provably keeps only listed ones; from then on the chain runs as is.
    bool known = false;
    bool tempered = false;  // a temperature step before the last truncation divided the logits
    const float t = params_.temperature;
    const auto temper = [&](float x) { return tempered ? x / t : x; };
    for (size_t i = 0; i < order.size(); ++i) {
        if (known) {
            run_step(order[i], i, last_truncation, draw_temperature);
            continue;
        }
        switch (order[i]) {
            case SamplerStep::penalties:
                break;
            case SamplerStep::top_k:
                if (params_.top_k <= 0) break;
                // Tempered logits may tie where the logits did not (then lower id first): unknowable.
                if (tempered || static_cast<size_t>(params_.top_k) > k) return false;
                take_prefix(top, static_cast<size_t>(params_.top_k), &candidates_);
                known = true;
                break;
            case SamplerStep::top_p: {
                if (params_.top_p >= 1.0f) break;
                const size_t n = tempered ? 0 : nucleus_end(top, params_.top_p);  // tempered: no normalizer
                if (n == 0) return false;
                take_prefix(top, n, &candidates_);
                known = true;
                break;
            }
            case SamplerStep::min_p: {
                if (params_.min_p <= 0.0f) break;
                // keep_min_p over all candidates in id order: those >= threshold, if none is unlisted.
                const float threshold = temper(max_logit) + std::log(params_.min_p);
                if (!(temper(top.logits[k - 1]) < threshold)) return false;
                candidates_.clear();
                for (size_t j = 0; j < k; ++j) {
                    const float v = temper(top.logits[j]);
                    if (v >= threshold) candidates_.push_back({top.ids[j], v});
                }
                sort_by_id(&candidates_);
                known = true;
                break;
            }
            case SamplerStep::temperature:
                if (i >= last_truncation) {
                    *draw_temperature = t;
                } else if (tempered) {
                    return false;
                } else {
                    tempered = true;
                }
                break;
        }
    }
    return known;  // no truncation kept listed ones only: the draw needs every logit
}

bool Sampler::sample_from_top(const TopCandidates& top, int32_t* token) {
    const size_t k = top.ids.size();
    if (k == 0 || top.logits.size() != k || top.n_vocab < k || top_candidates_wanted() == 0) return false;
    // The candidates must have been taken from the row this sampler sees: the same bans, or none.
    const std::vector<int32_t>* bans = banned_ != nullptr && !banned_->empty() ? banned_ : nullptr;
    const std::vector<int32_t>* masked = top.banned != nullptr && !top.banned->empty() ? top.banned : nullptr;
    if (bans != masked) return false;
    // The first candidate is argmax's pick unless the row has no finite maximum (a NaN first logit
    // shows as a NaN maximum: argmax stays on it, which the list ranks last).
    const float max_logit = top.max_logit;
    if (!std::isfinite(max_logit) || !(top.logits[0] == max_logit) || !std::isfinite(top.sum_exp) ||
        !(top.sum_exp > 0.0))
        return false;
    int32_t chosen = top.ids[0];
    if (params_.temperature != 0.0f) {
        float draw_temperature = 1.0f;
        if (!chain_from_top(top, &draw_temperature)) return false;  // before the draw: the generator is untouched
        chosen = draw(candidates_, draw_temperature);
    }
    float chosen_logit = top.logits[0];
    for (size_t j = 0; j < k; ++j)
        if (top.ids[j] == chosen) chosen_logit = top.logits[j];
    last_probability_ =
        static_cast<float>(static_cast<double>(exp_nonpositive(chosen_logit - max_logit)) / top.sum_exp);
    *token = chosen;
    return true;
}

}  // namespace cactus
