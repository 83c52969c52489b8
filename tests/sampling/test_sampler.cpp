#include <gtest/gtest.h>

#include <cmath>
#include <map>

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
