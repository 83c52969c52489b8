// Sampler::sample_from_top against sample(): two samplers with one seed see the same rows; one
// samples the logits, the other the row's top candidates (top_candidates_of: the CPU backend's
// top_k, normalizer in double) and, when it declines, the logits as the engine does. Tokens and
// last_probability() must agree at every step (so the generators stay in step), and the
// candidates must suffice for most steps of the settings they are meant for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/top_candidates.h"
#include "sampling/sampler.h"

using namespace cactus;

namespace {

// A row of logits: normal with spread `scale` (larger: peakier), a few -inf, optionally rounded
// to halves so that equal logits straddle the cut-offs.
std::vector<float> random_row(std::mt19937& rng, size_t n_vocab, float scale, bool ties) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> row(n_vocab);
    for (float& x : row) x = ties ? std::round(normal(rng) * 2.0f) / 2.0f : normal(rng);
    for (size_t i = 1; i < n_vocab; i += 97) row[i] = -INFINITY;
    return row;
}

struct Outcome {
    size_t steps = 0;
    size_t from_top = 0;  // steps sample_from_top answered
};

// Runs `steps` rows through both samplers; k: the candidates given (0: top_candidates_wanted()).
Outcome compare(const SamplingParams& params, size_t n_vocab, size_t steps, size_t k, uint32_t seed,
                const std::string& what) {
    Sampler full(params), top(params);
    std::mt19937 rng(seed);
    Outcome o;
    const size_t want = k != 0 ? k : top.top_candidates_wanted();
    for (size_t s = 0; s < steps; ++s) {
        const float scale = s % 3 == 0 ? 1.0f : s % 3 == 1 ? 3.0f : 8.0f;
        std::vector<float> row = random_row(rng, n_vocab, scale, s % 4 == 3);
        std::vector<float> a = row, b = row;
        const int32_t want_token = full.sample(a);
        int32_t got = -1;
        bool answered = false;
        if (want > 0) {
            TopCandidates c;
            top_candidates_of(row.data(), n_vocab, std::min(want, n_vocab), &c);
            answered = top.sample_from_top(c, &got);
        }
        if (!answered) got = top.sample(b);
        o.from_top += answered ? 1 : 0;
        ++o.steps;
        EXPECT_EQ(got, want_token) << what << " step " << s << (answered ? " (from the candidates)" : "");
        EXPECT_EQ(top.last_probability(), full.last_probability()) << what << " step " << s;
        if (::testing::Test::HasFailure()) break;
    }
    return o;
}

SamplingParams params(float temperature, int top_k, float top_p, float min_p, uint64_t seed) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

}  // namespace

TEST(SampleFromTop, GreedyIsTheArgmaxEveryStep) {
    for (size_t n_vocab : {size_t(1), size_t(7), size_t(5000)}) {
        const Outcome o = compare(params(0.0f, 0, 1.0f, 0.0f, 1), n_vocab, 60, 0, 11, "greedy");
        EXPECT_EQ(o.from_top, o.steps);
    }
}

TEST(SampleFromTop, TopKDrawsWhatSampleDraws) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        for (int k : {1, 5, 40}) {
            for (float t : {0.3f, 1.0f, 1.7f}) {
                const std::string what = "top_k " + std::to_string(k) + " t " + std::to_string(t);
                const Outcome o = compare(params(t, k, 1.0f, 0.0f, seed), 3000, 40, 0, uint32_t(seed * 7 + k), what);
                EXPECT_EQ(o.from_top, o.steps) << what;
            }
        }
    }
}

TEST(SampleFromTop, TopPAndMinPDrawWhatSampleDraws) {
    size_t answered = 0, steps = 0;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
        for (float p : {0.5f, 0.9f, 0.95f}) {
            const Outcome o = compare(params(0.8f, 0, p, 0.0f, seed), 3000, 40, 0, uint32_t(seed * 13), "top_p");
            answered += o.from_top;
            steps += o.steps;
        }
        for (float m : {0.05f, 0.2f}) {
            const Outcome o = compare(params(1.0f, 0, 1.0f, m, seed), 3000, 40, 0, uint32_t(seed * 17), "min_p");
            answered += o.from_top;
            steps += o.steps;
        }
    }
    // Peaked rows (two of three) keep their nucleus within 64 candidates.
    EXPECT_GT(answered, steps / 3) << answered << " of " << steps;
}

TEST(SampleFromTop, CombinationsAndOrdersDrawWhatSampleDraws) {
    size_t answered = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        answered +=
            compare(params(0.7f, 40, 0.95f, 0.05f, seed), 3000, 40, 0, uint32_t(seed), "default chain").from_top;
        answered += compare(params(0.7f, 40, 0.9f, 0.0f, seed), 3000, 40, 256, uint32_t(seed + 1), "k 256").from_top;
        SamplingParams first = params(1.3f, 20, 0.9f, 0.1f, seed);
        first.order = {SamplerStep::temperature, SamplerStep::top_k, SamplerStep::top_p, SamplerStep::min_p};
        compare(first, 3000, 40, 0, uint32_t(seed + 2), "temperature first");
        SamplingParams tempered_min_p = params(0.6f, 0, 1.0f, 0.1f, seed);
        tempered_min_p.order = {SamplerStep::temperature, SamplerStep::min_p};
        answered += compare(tempered_min_p, 3000, 40, 0, uint32_t(seed + 3), "tempered min_p").from_top;
        SamplingParams p_first = params(0.9f, 10, 0.8f, 0.0f, seed);
        p_first.order = {SamplerStep::top_p, SamplerStep::top_k, SamplerStep::temperature};
        compare(p_first, 3000, 40, 0, uint32_t(seed + 4), "top_p first");
        // A whole small vocabulary is known exactly, whatever the chain.
        const Outcome all = compare(params(1.0f, 0, 0.97f, 0.0f, seed), 50, 40, 50, uint32_t(seed + 5), "whole row");
        EXPECT_EQ(all.from_top, all.steps);
    }
    EXPECT_GT(answered, 0u);
}

TEST(SampleFromTop, DeclinesWhereTheCandidatesCannotTell) {
    std::mt19937 rng(5);
    const std::vector<float> row = random_row(rng, 2000, 1.0f, false);
    TopCandidates c;
    top_candidates_of(row.data(), row.size(), 64, &c);
    int32_t token = -1;
    const auto declines = [&](const SamplingParams& p) {
        Sampler s(p);
        return !s.sample_from_top(c, &token);
    };
    EXPECT_TRUE(declines(params(1.0f, 0, 1.0f, 0.0f, 1)));  // pure temperature: every logit counts
    SamplingParams bias = params(0.0f, 0, 1.0f, 0.0f, 1);
    bias.logit_bias = {{3, 1.0f}};
    EXPECT_TRUE(declines(bias));
    SamplingParams penalty = params(0.0f, 0, 1.0f, 0.0f, 1);
    penalty.repetition_penalty = 1.1f;
    EXPECT_TRUE(declines(penalty));
    SamplingParams presence = params(0.8f, 10, 1.0f, 0.0f, 1);
    presence.presence_penalty = 0.5f;
    EXPECT_TRUE(declines(presence));
    EXPECT_TRUE(declines(params(0.8f, 100, 1.0f, 0.0f, 1)));  // top_k beyond the 64 candidates
    EXPECT_TRUE(declines(params(0.8f, 300, 1.0f, 0.0f, 1)));  // beyond any device list
    EXPECT_TRUE(declines(params(1.0f, 0, 0.99f, 0.0f, 1)));   // a flat row's nucleus is wide
    {
        Sampler s(params(0.0f, 0, 1.0f, 0.0f, 1));
        const std::vector<int32_t> banned = {c.ids[5]};
        s.set_banned(&banned);
        EXPECT_FALSE(s.sample_from_top(c, &token));
    }
    // A NaN first logit: argmax stays on it, which the list ranks last.
    std::vector<float> nan_first = row;
    nan_first[0] = NAN;
    TopCandidates n;
    top_candidates_of(nan_first.data(), nan_first.size(), 8, &n);
    Sampler greedy(params(0.0f, 0, 1.0f, 0.0f, 1));
    EXPECT_FALSE(greedy.sample_from_top(n, &token));
    // Penalties that are off, or left out of the chain, do not stop it.
    SamplingParams off = params(0.0f, 0, 1.0f, 0.0f, 1);
    off.repetition_penalty = 1.3f;
    off.order = {SamplerStep::top_k, SamplerStep::temperature};
    Sampler s(off);
    EXPECT_TRUE(s.sample_from_top(c, &token));
    EXPECT_EQ(token, c.ids[0]);
}

TEST(SampleFromTop, CandidatesTakenUnderTheSameBansServe) {
    // ignore_eos on the device (DecoderModel::ban_logits): the candidates of the row with the
    // banned logits at -inf, marked with the list, give what sample() gives with those bans set on
    // the raw row; any other list (even an equal copy: the owner's list is the contract) declines.
    const size_t n_vocab = 5000;
    std::mt19937 rng(91);
    const std::vector<int32_t> banned = {7, 4999, 123};
    const std::vector<int32_t> copy = banned;
    for (const SamplingParams& p :
         {params(0.0f, 0, 1.0f, 0.0f, 5), params(0.8f, 40, 1.0f, 0.0f, 5), params(0.9f, 0, 0.9f, 0.0f, 5)}) {
        Sampler full(p), top(p);
        full.set_banned(&banned);
        top.set_banned(&banned);
        size_t answered = 0;
        for (size_t step = 0; step < 60; ++step) {
            std::vector<float> row = random_row(rng, n_vocab, step % 2 == 0 ? 3.0f : 8.0f, false);
            row[static_cast<size_t>(banned[step % 3])] = 50.0f;  // a banned id would win every draw
            std::vector<float> masked = row, scratch = row;
            for (int32_t id : banned) masked[static_cast<size_t>(id)] = -INFINITY;
            const int32_t want = full.sample(row);
            TopCandidates c;
            top_candidates_of(masked.data(), n_vocab, top.top_candidates_wanted(), &c);
            c.banned = &banned;
            int32_t got = -1;
            const bool from_top = top.sample_from_top(c, &got);
            if (!from_top) got = top.sample(scratch);
            answered += from_top ? 1 : 0;
            ASSERT_EQ(got, want) << "step " << step;
            ASSERT_EQ(top.last_probability(), full.last_probability()) << "step " << step;
        }
        // Greedy and top_k always can; a nucleus of the flatter rows reaches past the 64 candidates.
        EXPECT_GE(answered, p.top_p < 1.0f ? 20u : 60u) << "temperature " << p.temperature;
    }
    std::vector<float> row = random_row(rng, n_vocab, 3.0f, false);
    TopCandidates c;
    top_candidates_of(row.data(), n_vocab, 8, &c);
    c.banned = &banned;
    int32_t token = -1;
    Sampler none(params(0.0f, 0, 1.0f, 0.0f, 1)), other(params(0.0f, 0, 1.0f, 0.0f, 1));
    EXPECT_FALSE(none.sample_from_top(c, &token));  // the candidates lack ids this sampler allows
    other.set_banned(&copy);
    EXPECT_FALSE(other.sample_from_top(c, &token));
}

TEST(SampleFromTop, WantsCandidatesForTheSettingsItServes) {
    EXPECT_EQ(Sampler(params(0.0f, 0, 1.0f, 0.0f, 1)).top_candidates_wanted(), 1u);
    EXPECT_EQ(Sampler(params(0.8f, 40, 0.9f, 0.0f, 1)).top_candidates_wanted(), 40u);
    EXPECT_EQ(Sampler(params(0.8f, 0, 0.9f, 0.0f, 1)).top_candidates_wanted(), Sampler::kNucleusCandidates);
    EXPECT_EQ(Sampler(params(0.8f, 0, 1.0f, 0.1f, 1)).top_candidates_wanted(), Sampler::kNucleusCandidates);
    EXPECT_EQ(Sampler(params(0.8f, 0, 1.0f, 0.0f, 1)).top_candidates_wanted(), 0u);
    EXPECT_EQ(Sampler(params(0.8f, 1000, 1.0f, 0.0f, 1)).top_candidates_wanted(), 0u);
    SamplingParams bias = params(0.0f, 0, 1.0f, 0.0f, 1);
    bias.logit_bias = {{1, -INFINITY}};
    EXPECT_EQ(Sampler(bias).top_candidates_wanted(), 0u);
}
