#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "sampling/sampler.h"

using namespace cactus;

namespace {
std::vector<float> make_logits() { return {0.5f, 3.0f, -1.0f, 2.5f, 1.0f, 2.9f, -4.0f}; }

std::vector<TokenCandidate> candidates_of(const std::vector<float>& logits) {
    std::vector<TokenCandidate> c;
    for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i]});
    return c;
}
}  // namespace

TEST(Sampler, GreedyPicksArgmax) {
    Sampler s(SamplingParams{});
    auto logits = make_logits();
    EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, TopKKeepsTheKLargestSorted) {
    auto c = candidates_of(make_logits());
    keep_top_k(c, 3);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0].id, 1);
    EXPECT_EQ(c[1].id, 5);
    EXPECT_EQ(c[2].id, 3);
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingP) {
    auto c = candidates_of({10.0f, 0.0f, -10.0f});
    keep_top_k(c, 0);
    keep_top_p(c, 0.9f);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].id, 0);
    auto d = candidates_of({1.0f, 1.0f, 1.0f, 1.0f});
    keep_top_k(d, 0);
    keep_top_p(d, 0.6f);  // each 0.25: need 3 to reach 0.6
    EXPECT_EQ(d.size(), 3u);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfBest) {
    auto c = candidates_of({0.0f, std::log(0.5f), std::log(0.05f)});
    keep_top_k(c, 0);
    keep_min_p(c, 0.1f);
    EXPECT_EQ(c.size(), 2u);
}

TEST(Sampler, SameSeedSameSequence) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 42;
    Sampler a(p), b(p);
    for (int i = 0; i < 50; ++i) {
        auto la = make_logits(), lb = make_logits();
        EXPECT_EQ(a.sample(la), b.sample(lb));
    }
}

TEST(Sampler, TemperatureSamplingFollowsDistribution) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 7;
    Sampler s(p);
    std::map<int32_t, int> counts;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
        std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 0.25, 0.75
        counts[s.sample(logits)]++;
    }
    EXPECT_NEAR(counts[1] / double(n), 0.75, 0.02);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    Sampler s(p);
    s.accept(1);
    std::vector<float> logits = {2.0f, 3.0f};  // 3/2 = 1.5 < 2
    EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, InvalidParametersAreErrors) {
    SamplingParams p;
    p.temperature = -1.0f;
    EXPECT_THROW(Sampler{p}, Error);
    p = SamplingParams{};
    p.top_p = 0.0f;
    EXPECT_THROW(Sampler{p}, Error);
    p = SamplingParams{};
    p.min_p = 1.5f;
    EXPECT_THROW(Sampler{p}, Error);
}

TEST(Sampler, LastProbabilityIsSoftmaxOfChosen) {
    Sampler s(SamplingParams{});
    std::vector<float> logits = {0.0f, std::log(3.0f)};
    EXPECT_EQ(s.sample(logits), 1);
    EXPECT_NEAR(s.last_probability(), 0.75f, 1e-5);
}

namespace {
// A vocabulary-sized row of logits with a few -inf entries (as a grammar mask leaves them).
std::vector<float> vocabulary_logits(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<float> logits(n);
    for (float& l : logits) l = normal(rng);
    for (size_t i = 0; i < n; i += 97) logits[i] = -INFINITY;
    return logits;
}
}  // namespace

// The vectorised exp sum: the chosen token's probability equals a double-precision softmax.
TEST(Sampler, LastProbabilityMatchesDoubleSoftmaxOverAVocabulary) {
    for (uint32_t seed : {1u, 2u, 3u}) {
        std::vector<float> logits = vocabulary_logits(49157, seed);
        logits[123] = 40.0f - static_cast<float>(seed);  // one clear winner, one tie-free maximum
        double max = -INFINITY;
        for (float l : logits) max = std::max(max, static_cast<double>(l));
        double sum = 0.0;
        for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
        const double want = std::exp(static_cast<double>(logits[123]) - max) / sum;
        Sampler s(SamplingParams{});
        std::vector<float> scratch = logits;
        ASSERT_EQ(s.sample(scratch), 123);
        EXPECT_NEAR(s.last_probability(), want, 2e-6 * want) << "seed " << seed;
    }
}

// top-p and min-p take candidates in any order: the same tokens as on sorted input.
TEST(Sampler, TopPAndMinPAgreeOnUnsortedInput) {
    std::vector<float> logits = vocabulary_logits(5003, 9);
    for (float p : {0.05f, 0.5f, 0.9f, 0.999f}) {
        auto sorted = candidates_of(logits), shuffled = candidates_of(logits);
        keep_top_k(sorted, 0);
        std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
        keep_top_p(sorted, p);
        keep_top_p(shuffled, p);
        ASSERT_EQ(sorted.size(), shuffled.size()) << "top_p " << p;
        for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i].id, shuffled[i].id) << "top_p " << p;
    }
    for (float min_p : {0.01f, 0.3f}) {
        auto sorted = candidates_of(logits), shuffled = candidates_of(logits);
        keep_top_k(sorted, 0);
        std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(6));
        keep_min_p(sorted, min_p);
        keep_min_p(shuffled, min_p);
        ASSERT_EQ(sorted.size(), shuffled.size()) << "min_p " << min_p;
        std::vector<int32_t> a, b;
        for (const TokenCandidate& t : sorted) a.push_back(t.id);
        for (const TokenCandidate& t : shuffled) b.push_back(t.id);
        std::sort(b.begin(), b.end(), [&](int32_t x, int32_t y) { return logits[size_t(x)] > logits[size_t(y)]; });
        EXPECT_EQ(a, b) << "min_p " << min_p;
    }
}

// Over a whole vocabulary without truncation (the OpenAI defaults: temperature 1, top_p 1), draws
// follow the softmax at the temperature and never pick a masked (-inf) token.
TEST(Sampler, UntruncatedDrawsFollowTheTemperatureSoftmax) {
    std::vector<float> logits(4099, -INFINITY);
    logits[10] = 1.0f;
    logits[2000] = 1.0f + 0.5f * std::log(3.0f);  // at temperature 0.5: 3x token 10's weight
    logits[4098] = -100.0f;                       // weight e^-202 relative: never drawn
    SamplingParams p;
    p.temperature = 0.5f;
    p.seed = 11;
    Sampler s(p);
    std::map<int32_t, int> counts;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
        std::vector<float> scratch = logits;
        counts[s.sample(scratch)]++;
    }
    EXPECT_EQ(counts.size(), 2u);
    EXPECT_NEAR(counts[2000] / double(n), 0.75, 0.02);
}

TEST(Sampler, NanLogitsAreAnErrorNotACrash) {
    SamplingParams p;
    p.temperature = 1.0f;
    Sampler s(p);
    std::vector<float> logits(16, NAN);
    EXPECT_THROW(s.sample(logits), Error);
}

TEST(Sampler, BannedTokensAreNeverDrawnUntilUnset) {
    // ignore_eos: the end-of-turn ids (here the two best logits) are kept out of greedy and random draws.
    const std::vector<int32_t> banned = {1, 5};
    for (float temperature : {0.0f, 1.5f}) {
        SamplingParams params;
        params.temperature = temperature;
        params.seed = 11;
        Sampler s(params);
        s.set_banned(&banned);
        for (int i = 0; i < 200; ++i) {
            auto logits = make_logits();
            int32_t t = s.sample(logits);
            EXPECT_NE(t, 1);
            EXPECT_NE(t, 5);
        }
        s.set_banned(nullptr);
        auto logits = make_logits();
        if (temperature == 0.0f) EXPECT_EQ(s.sample(logits), 1);
    }
}

namespace {
// A vocabulary of odd size whose argmax is `best`, the others descending by id distance.
std::vector<float> odd_vocab(size_t n, size_t best) {
    std::vector<float> logits(n);
    for (size_t i = 0; i < n; ++i) logits[i] = -0.01f * static_cast<float>((i > best ? i - best : best - i) % 100);
    logits[best] = 5.0f;
    return logits;
}

std::set<int32_t> draws(const SamplingParams& p, const std::vector<float>& logits, int n) {
    Sampler s(p);
    std::set<int32_t> seen;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = logits;
        seen.insert(s.sample(l));
    }
    return seen;
}
}  // namespace

TEST(Sampler, LogitBiasBansAndBoostsOnOddVocabularies) {
    for (size_t n : {7u, 1001u, 49153u}) {
        SamplingParams ban;
        ban.logit_bias = {{3, -INFINITY}};
        std::vector<float> logits = odd_vocab(n, 3);
        EXPECT_NE(Sampler(ban).sample(logits), 3) << n;
        EXPECT_EQ(logits[3], -INFINITY);
        SamplingParams boost;
        boost.logit_bias = {{static_cast<int32_t>(n - 1), 100.0f},
                            {static_cast<int32_t>(n + 5), 100.0f}};  // past the end: ignored
        logits = odd_vocab(n, 3);
        EXPECT_EQ(Sampler(boost).sample(logits), static_cast<int32_t>(n - 1)) << n;
        boost.temperature = 1.0f;
        boost.seed = 9;
        EXPECT_EQ(draws(boost, odd_vocab(n, 3), 20), std::set<int32_t>{static_cast<int32_t>(n - 1)}) << n;
    }
}

TEST(Sampler, LogitBiasRejectsNegativeIdsAndNaN) {
    SamplingParams p;
    p.logit_bias = {{-1, 1.0f}};
    EXPECT_THROW(Sampler{p}, Error);
    p.logit_bias = {{1, NAN}};
    EXPECT_THROW(Sampler{p}, Error);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesFollowOpenAI) {
    // logit 3.0 of token 1, seen twice: 3.0 - 2 * 0.5 - 0.3 = 1.7 < 2.9 of token 5.
    SamplingParams p;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.3f;
    Sampler s(p);
    s.accept(1);
    s.accept(1);
    s.accept(4);
    std::vector<float> logits = make_logits();
    EXPECT_EQ(s.sample(logits), 5);
    EXPECT_FLOAT_EQ(logits[1], 1.7f);
    EXPECT_FLOAT_EQ(logits[4], 1.0f - 0.5f - 0.3f);
    EXPECT_FLOAT_EQ(logits[0], 0.5f);
    // Outside the window: no penalty.
    p.repetition_window = 1;
    Sampler w(p);
    w.accept(1);
    w.accept(4);
    logits = make_logits();
    EXPECT_EQ(w.sample(logits), 1);
}

TEST(Sampler, AnOrderWithoutPenaltiesSkipsThem) {
    SamplingParams p;
    p.repetition_penalty = 10.0f;
    p.order = {SamplerStep::top_k, SamplerStep::temperature};
    Sampler s(p);
    s.accept(1);
    std::vector<float> logits = make_logits();
    EXPECT_EQ(s.sample(logits), 1);
    EXPECT_FLOAT_EQ(logits[1], 3.0f);
}

TEST(Sampler, TemperatureBeforeTopPWidensTheNucleus) {
    // softmax(2, 1, 0) = .665, .245, .090: top_p 0.6 keeps token 0 alone; at temperature 10 first
    // the probabilities are .367, .332, .301 and the nucleus holds two tokens.
    SamplingParams p;
    p.temperature = 10.0f;
    p.top_p = 0.6f;
    p.seed = 3;
    const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
    EXPECT_EQ(draws(p, logits, 200), (std::set<int32_t>{0}));
    p.order = {SamplerStep::temperature, SamplerStep::top_p};
    EXPECT_EQ(draws(p, logits, 200), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TheDefaultOrderWrittenOutDrawsTheSameTokens) {
    SamplingParams a;
    a.temperature = 0.8f;
    a.top_k = 40;
    a.top_p = 0.95f;
    a.min_p = 0.05f;
    a.seed = 77;
    SamplingParams b = a;
    b.order = {SamplerStep::penalties, SamplerStep::top_k, SamplerStep::top_p, SamplerStep::min_p,
               SamplerStep::temperature};
    Sampler sa(a), sb(b);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (int i = 0; i < 50; ++i) {
        std::vector<float> l(1001);
        for (float& x : l) x = normal(rng);
        std::vector<float> l2 = l;
        EXPECT_EQ(sa.sample(l), sb.sample(l2));
    }
}
