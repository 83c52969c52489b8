#pragma once
// Turns next-token logits into a token: logit biases, then a chain of small steps (penalties,
// top-k, top-p, min-p, temperature; the order can be chosen, as llama.cpp's --samplers) followed
// by a draw from a seeded generator, or greedy argmax when the temperature is 0. The same seed
// and inputs give the same tokens.
#include <cstdint>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "ops/top_candidates.h"

namespace cactus {

// The steps of the chain. Penalties always act on the whole vocabulary before truncation (their
// place in the order only says whether they run); temperature placed before a truncating step
// makes that step see the tempered distribution, as in llama.cpp.
enum class SamplerStep { penalties, top_k, top_p, min_p, temperature };

struct SamplingParams {
    float temperature = 0.0f;         // 0 = greedy
    int top_k = 0;                    // 0 = off
    float top_p = 1.0f;               // 1 = off
    float min_p = 0.0f;               // 0 = off
    float repetition_penalty = 1.0f;  // 1 = off
    int repetition_window = 64;       // how many recent tokens the penalties look at
    // OpenAI's penalties over the same window (llama.cpp's penalties sampler): a token seen c > 0
    // times loses c * frequency_penalty + presence_penalty from its logit.
    float presence_penalty = 0.0f;   // 0 = off
    float frequency_penalty = 0.0f;  // 0 = off
    // Added to a token's logit before the chain (OpenAI's logit_bias); -inf never draws it. A token
    // listed twice gets both biases.
    std::vector<std::pair<int32_t, float>> logit_bias;
    // The chain's order; empty = {penalties, top_k, top_p, min_p, temperature}. A step left out does
    // not run (without temperature the draw is at temperature 1, unless temperature is 0: greedy).
    std::vector<SamplerStep> order;
    uint64_t seed = 0;  // 0 = seeded from the clock
};

struct TokenCandidate {
    int32_t id;
    float logit;
};

// The distribution a draw picks from: candidate ids and their probabilities (summing to 1). Greedy
// sampling gives the argmax alone with probability 1.
struct TokenDistribution {
    std::vector<int32_t> ids;
    std::vector<double> probs;
    double probability(int32_t id) const;  // 0 for a token that is not a candidate
};

class GrammarConstraint;

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // Constrained decoding: before each draw the grammar masks the tokens it rejects, and the
    // chosen token advances it (not owned; nullptr = free text).
    void set_constraint(GrammarConstraint* constraint) { constraint_ = constraint; }
    double constraint_ms() const { return constraint_ms_; }  // time spent masking and advancing
    // Tokens never drawn while set (ignore_eos: the end-of-turn tokens); not owned, nullptr = none.
    void set_banned(const std::vector<int32_t>* ids) { banned_ = ids; }

    // Picks the next token from logits ([n_vocab]); `logits` is used as scratch.
    int32_t sample(std::vector<float>& logits);
    // sample() from the k largest logits of the row and its normalizer (Backend::top_k), for a
    // step whose logits stayed on the device. Returns false, without touching the generator, when
    // the candidates cannot tell sample()'s draw for certain: a grammar, logit biases, penalties,
    // bans other than those the candidates were taken under (TopCandidates::banned: the same list
    // or none), no truncation at a non-zero temperature, a nucleus (top_p, min_p) that may reach past
    // the k-th candidate, or a row without a finite maximum; the caller then fetches the logits
    // and calls sample(). Otherwise *token is sample()'s token on the same row and generator state,
    // and last_probability() is sample()'s, up to the rounding of the normalizer (exact with
    // top_candidates_of()'s double sum; the devices' top_k returns it in f32).
    bool sample_from_top(const TopCandidates& top, int32_t* token);
    // How many candidates sample_from_top needs to have a chance: 1 for greedy, top_k (up to
    // kTopKMax), kNucleusCandidates for top_p / min_p without top_k; 0 when it never can (see
    // above; bans are set per step and are checked there).
    size_t top_candidates_wanted() const;
    static constexpr size_t kNucleusCandidates = 64;
    // The distribution sample() would draw from for these logits (the same bias, penalties, bans and
    // chain), without drawing; `logits` is used as scratch. Speculative decoding judges drafted
    // tokens with it. Not with a grammar (a constraint set is an error: its mask advances per token).
    void distribution(std::vector<float>& logits, TokenDistribution* out);
    // The softmax probability (temperature 1, before truncation) of `id` under the logits last given
    // to distribution(): what last_probability() reports when sample() draws `id`. Sets it as such.
    void note_chosen(int32_t id);
    // A number uniform in [0, 1) and a draw from d, from the sampler's generator (seeded runs repeat).
    double uniform();
    int32_t draw_from(const TokenDistribution& d);

    // Tokens the repetition penalty should know about (prompt and generated ones).
    void accept(int32_t token);
    void reset_history() { history_.clear(); }

    // Softmax probability of the token chosen last, before truncation (a confidence signal).
    float last_probability() const { return last_probability_; }

private:
    void apply_logit_bias(std::vector<float>& logits) const;
    void apply_penalties(std::vector<float>& logits) const;
    // Truncation and temperature in the chain's order over candidates_; returns the temperature
    // the draw still applies (1 when the chain already tempered the logits).
    float run_chain();
    // Step i of the chain's order over candidates_ (run_chain's body; sample_from_top continues
    // with it once the candidates are known exactly).
    void run_step(SamplerStep step, size_t i, size_t last_truncation, float* draw_temperature);
    // sample_from_top's chain: candidates_ as chain_candidates() and the steps would leave them,
    // built from the top candidates; false when they cannot be known.
    bool chain_from_top(const TopCandidates& top, float* draw_temperature);
    // Bias, penalties and bans applied to logits (sample() and distribution() share them).
    void adjust(std::vector<float>& logits) const;
    // The candidates left after the floor and the chain, for a non-zero temperature; returns the
    // temperature the draw applies.
    float chain_candidates(const std::vector<float>& logits, float max_logit);
    int32_t draw(const std::vector<TokenCandidate>& c, float temperature);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    std::vector<TokenCandidate> candidates_;
    std::vector<float> weights_;  // draw's scratch, [candidates]
    float last_probability_ = 0.0f;
    // Of the logits distribution() was given last: their maximum and softmax denominator, and where
    // they are (the caller's vector; read by note_chosen() before it changes).
    const std::vector<float>* dist_logits_ = nullptr;
    float dist_max_ = 0.0f;
    double dist_denom_ = 1.0;
    GrammarConstraint* constraint_ = nullptr;
    const std::vector<int32_t>* banned_ = nullptr;
    double constraint_ms_ = 0.0;
};

// The individual steps, exposed for tests. keep_top_k sorts `c` by descending logit (all of it
// when k is 0); keep_top_p takes `c` in any order and leaves the kept prefix sorted; keep_min_p
// takes any order and keeps it.
int32_t argmax(const std::vector<float>& logits);
void keep_top_k(std::vector<TokenCandidate>& c, int k);
void keep_top_p(std::vector<TokenCandidate>& c, float p);
void keep_min_p(std::vector<TokenCandidate>& c, float min_p);

}  // namespace cactus
