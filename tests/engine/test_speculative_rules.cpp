// Speculative decoding without a real model: prompt lookup, the accept/reject rule, and the whole
// token stream (drafting, verification, rollback) on a small-vocabulary Markov model, whose exact
// next-token distributions make the sampling claim testable: replies drawn with drafts follow the
// same distribution as plain replies (chi-square), and greedy replies are the same tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/error.h"
#include "engine/speculative.h"
#include "sampling/draft_acceptance.h"
#include "sampling/sampler.h"

using namespace cactus;

namespace {

// The chi-square statistic's 0.999 quantile for `df` degrees of freedom (Wilson-Hilferty; within 1%
// of the exact value for df >= 3). A correct sampler exceeds it in 1 run of 1000.
double chi_square_bound(size_t df) {
    const double k = static_cast<double>(df);
    const double z = 3.090;  // the standard normal's 0.999 quantile
    const double a = 2.0 / (9.0 * k);
    return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Sum over cells of (observed - expected)^2 / expected; cells expected below 5 are pooled.
double chi_square(const std::vector<double>& expected_probs, const std::vector<size_t>& observed, size_t n,
                  size_t* df) {
    double stat = 0.0, pooled_e = 0.0, pooled_o = 0.0;
    size_t cells = 0;
    for (size_t i = 0; i < observed.size(); ++i) {
        const double e = expected_probs[i] * static_cast<double>(n);
        if (e < 5.0) {
            pooled_e += e;
            pooled_o += static_cast<double>(observed[i]);
            continue;
        }
        stat += (observed[i] - e) * (observed[i] - e) / e;
        ++cells;
    }
    if (pooled_e > 0.0) {
        stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
        ++cells;
    }
    *df = cells - 1;
    return stat;
}

// A Markov "model" over a few tokens: the logits after a token depend on that token and on its
// position, so every row of a verification step differs.
class MarkovTarget final : public SpecTarget {
public:
    static constexpr size_t kVocab = 6;
    explicit MarkovTarget(uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.2f);
        for (float& x : table_) x = normal(rng);
    }
    std::vector<float> logits_after(int32_t token, size_t pos) const {
        std::vector<float> l(kVocab);
        for (size_t j = 0; j < kVocab; ++j)
            l[j] = table_[static_cast<size_t>(token) * kVocab + j] +
                   0.4f * std::sin(0.7f * static_cast<float>(pos * (j + 1)));
        return l;
    }
    void append_scored(const int32_t* ids, size_t n, std::vector<float>* logits) override {
        logits->clear();
        for (size_t i = 0; i < n; ++i) {
            cached_.push_back(ids[i]);
            const auto row = logits_after(ids[i], cached_.size());
            logits->insert(logits->end(), row.begin(), row.end());
        }
        ++steps_;
    }
    void keep(size_t n) override {
        ASSERT_LE(n, cached_.size());
        cached_.resize(n);
    }
    size_t n_cached() const override { return cached_.size(); }
    size_t reserve(size_t wanted) override { return std::min<size_t>(wanted, 1000 - cached_.size()); }
    size_t max_step() const override { return 64; }
    const std::vector<int32_t>& cached() const { return cached_; }

private:
    float table_[kVocab * kVocab];
    std::vector<int32_t> cached_;
    size_t steps_ = 0;
};

// Drafts a fixed guess (the token after the last, modulo the vocabulary): right sometimes, wrong
// often, so both acceptance and rejection (with rollback) are exercised.
class GuessDrafter final : public Drafter {
public:
    const char* name() const override { return "guess"; }
    void draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) override {
        out->clear();
        int32_t t = history.back();
        for (size_t i = 0; i < max; ++i) out->push_back(t = (t + 1) % int32_t(MarkovTarget::kVocab));
    }
};

std::unique_ptr<SpecDecoder> guess_decoder(size_t draft_max) {
    SpecOptions o;
    o.type = SpecType::ngram;
    o.draft_max = draft_max;
    o.adaptive = false;
    std::vector<std::unique_ptr<Drafter>> d;
    d.push_back(std::make_unique<GuessDrafter>());
    return std::make_unique<SpecDecoder>(o, std::move(d));
}

// One reply of n tokens from the Markov model after prompt {0}, with or without drafting.
std::vector<int32_t> reply(MarkovTarget& target, SpecDecoder* spec, Sampler& sampler, size_t n) {
    target.keep(0);
    std::vector<float> logits;
    const int32_t first = 0;
    target.append_scored(&first, 1, &logits);
    TokenSource source(target, spec, sampler, {first}, logits);
    std::vector<int32_t> out;
    for (size_t i = 0; i < n; ++i) {
        const int32_t t = source.next();
        out.push_back(t);
        sampler.accept(t);
        if (i + 1 < n) source.advance(t);
    }
    source.finish(1, out.size());
    return out;
}

double softmax_at(const std::vector<float>& l, size_t j, float temperature) {
    double z = 0.0;
    const float m = *std::max_element(l.begin(), l.end());
    for (float x : l) z += std::exp((x - m) / temperature);
    return std::exp((l[j] - m) / temperature) / z;
}

}  // namespace

TEST(NgramDrafter, DraftsWhatFollowedTheLatestEarlierMatchOfTheLongestSuffix) {
    NgramDrafter d(2, 3);
    std::vector<int32_t> out;
    // Suffix {7, 8, 9} occurs at 1 (followed by 1, 2) and at 6 (followed by 4, 5): the latest wins.
    d.draft({5, 7, 8, 9, 1, 2, 7, 8, 9, 4, 5, 6, 7, 8, 9}, 8, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6, 7, 8, 9}));
    d.draft({5, 7, 8, 9, 1, 2, 7, 8, 9, 4, 5, 6, 7, 8, 9}, 2, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5}));
    // Only a 2-token suffix matches.
    d.draft({1, 2, 3, 4, 0, 3, 4}, 8, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{0, 3, 4}));
    // No match, too short a history, or an image row in the suffix: no draft.
    d.draft({1, 2, 3, 4, 5}, 8, &out);
    EXPECT_TRUE(out.empty());
    d.draft({1}, 8, &out);
    EXPECT_TRUE(out.empty());
    d.draft({1, -1, 3, 1, -1}, 8, &out);
    EXPECT_TRUE(out.empty());
    // A draft stops before an image row.
    d.draft({4, 5, 6, -2, 9, 4, 5}, 8, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{6}));
    EXPECT_THROW(NgramDrafter(0, 2), Error);
}

// A reply copying its input moves through it in order: after a draft from one place, a suffix that
// also occurs later (", w" below) continues the copy where the draft left off, not at its latest
// occurrence.
TEST(NgramDrafter, ACopyGoesOnWhereThePreviousDraftCameFrom) {
    NgramDrafter d(2, 2);
    std::vector<int32_t> out;
    // Source: f ( x , w ) : r = x , w + 1 ; g ( x , w ) ...  then the reply "f ( y".
    std::vector<int32_t> h = {10, 11, 20, 12, 13, 14, 15, 16, 17, 20, 12, 13, 18, 19, 30, 11, 20, 12, 13, 14, 10, 11};
    d.draft(h, 2, &out);  // suffix "f (" occurs at 0: draft "x ,"
    EXPECT_EQ(out, (std::vector<int32_t>{20, 12}));
    // The reply wrote y instead of x, then ","; the suffix ", w" (12 13) occurs at 3 (near the
    // previous draft's source), at 10 and at 17 (latest): the copy goes on from 3.
    h.insert(h.end(), {21, 12, 13});
    d.draft(h, 3, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{14, 15, 16}));
    EXPECT_THROW(NgramDrafter(3, 2), Error);
}

// A rename: the reply wrote 50 where the draft (copying the source) had 12; later drafts copy every
// 12 of the source as 50, and match the reply's "50" against the source's "12".
TEST(NgramDrafter, ARenameSeenOnceIsAppliedToLaterDrafts) {
    NgramDrafter d(2, 2);
    std::vector<int32_t> out;
    // Source: a ( 12 , b ) { c = 12 ; d = 12 + 1 } ; the reply so far "a (".
    std::vector<int32_t> h = {1, 2, 12, 3, 4, 5, 6, 7, 12, 8, 9, 7, 12, 10, 11, 99, 1, 2};
    d.draft(h, 4, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{12, 3, 4, 5}));
    h.push_back(50);  // the model wrote 50 instead of 12 (then its own next token, 3)
    h.push_back(3);
    d.draft(h, 8, &out);  // suffix "50 3" matches the source's "12 3" once 12 reads as 50
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6, 7, 50, 8, 9, 7}));
    // A new, shorter conversation forgets the rename.
    d.draft({1, 2, 12, 3, 1, 2}, 2, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{12, 3}));
}

// A reply that departs from the copy and goes its own way (50 then 60 where the source had 12 3) is
// no rename: later drafts still copy 12 as 12.
TEST(NgramDrafter, ADepartureThatDoesNotGoOnCopyingIsNoRename) {
    NgramDrafter d(2, 2);
    std::vector<int32_t> out;
    std::vector<int32_t> h = {1, 2, 12, 3, 4, 5, 6, 7, 12, 8, 9, 7, 12, 10, 11, 99, 1, 2};
    d.draft(h, 4, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{12, 3, 4, 5}));
    h.insert(h.end(), {50, 60});
    d.draft(h, 4, &out);
    h.insert(h.end(), {9, 7});  // "9 7" is followed by 12 10 11 99 in the source
    d.draft(h, 4, &out);
    EXPECT_EQ(out, (std::vector<int32_t>{12, 10, 11, 99}));
}

TEST(DraftAcceptance, KeptAndReplacedTokensFollowTheModelsDistribution) {
    TokenDistribution p;
    p.ids = {0, 1, 2, 3, 4};
    p.probs = {0.05, 0.4, 0.3, 0.2, 0.05};
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.seed = 7;
    Sampler rng(sp);
    for (int32_t drafted : {1, 4, 9}) {  // likely, unlikely, impossible
        std::vector<size_t> counts(5, 0);
        const size_t n = 20000;
        size_t kept = 0;
        for (size_t i = 0; i < n; ++i) {
            const DraftVerdict v = judge_draft(p, drafted, rng);
            ASSERT_GE(v.token, 0);
            ASSERT_LT(v.token, 5);
            if (v.accepted) {
                ASSERT_EQ(v.token, drafted);
                ++kept;
            }
            ++counts[static_cast<size_t>(v.token)];
        }
        size_t df = 0;
        const double stat = chi_square(p.probs, counts, n, &df);
        EXPECT_LT(stat, chi_square_bound(df)) << "drafted " << drafted;
        const double want_kept = p.probability(drafted);
        EXPECT_NEAR(static_cast<double>(kept) / n, want_kept, 0.02) << "drafted " << drafted;
    }
    // Greedy: the argmax alone; a draft is kept iff it is the argmax.
    TokenDistribution g;
    g.ids = {3};
    g.probs = {1.0};
    EXPECT_TRUE(judge_draft(g, 3, rng).accepted);
    const DraftVerdict no = judge_draft(g, 2, rng);
    EXPECT_FALSE(no.accepted);
    EXPECT_EQ(no.token, 3);
}

TEST(TokenSource, GreedyRepliesWithDraftsAreThePlainReplies) {
    MarkovTarget target(11);
    SamplingParams sp;  // greedy
    for (size_t draft_max : {1, 3, 8}) {
        Sampler a(sp), b(sp);
        const auto plain = reply(target, nullptr, a, 40);
        auto spec = guess_decoder(draft_max);
        const auto drafted = reply(target, spec.get(), b, 40);
        EXPECT_EQ(drafted, plain) << "draft_max " << draft_max;
        // The cache holds the prompt and the reply but its last token, as plain decoding leaves it.
        std::vector<int32_t> want = {0};
        want.insert(want.end(), plain.begin(), plain.end() - 1);
        EXPECT_EQ(target.cached(), want);
    }
}

// 10^4 replies of three tokens sampled with drafts: the empirical distribution of the
// (first, second, third) tokens matches the exact one of the Markov model within the chi-square
// bound (0.999 quantile), at two sampler settings (plain temperature; a lower temperature with
// top-k truncation).
TEST(TokenSource, SampledRepliesWithDraftsFollowTheModelsDistribution) {
    MarkovTarget target(5);
    const size_t V = MarkovTarget::kVocab;
    struct Setting {
        float temperature;
        int top_k;
    };
    for (Setting s : {Setting{1.0f, 0}, Setting{0.7f, 4}}) {
        SamplingParams sp;
        sp.temperature = s.temperature;
        sp.top_k = s.top_k;
        sp.seed = 1234;
        Sampler sampler(sp);
        auto spec = guess_decoder(3);
        const size_t n = 10000;
        std::vector<size_t> counts(V * V * V, 0);
        for (size_t i = 0; i < n; ++i) {
            const auto r = reply(target, spec.get(), sampler, 3);
            sampler.reset_history();
            ++counts[(static_cast<size_t>(r[0]) * V + static_cast<size_t>(r[1])) * V + static_cast<size_t>(r[2])];
        }
        // Exact probabilities: the chain's softmax (tempered, top-k kept) at positions 1, 2, 3.
        auto step_probs = [&](int32_t token, size_t pos) {
            std::vector<float> l = target.logits_after(token, pos);
            std::vector<double> p(V);
            std::vector<float> kept = l;
            if (s.top_k > 0) {
                std::vector<float> sorted = l;
                std::sort(sorted.begin(), sorted.end(), std::greater<float>());
                const float cut = sorted[static_cast<size_t>(s.top_k) - 1];
                for (float& x : kept)
                    if (x < cut) x = -INFINITY;
            }
            for (size_t j = 0; j < V; ++j) p[j] = std::isfinite(kept[j]) ? softmax_at(kept, j, s.temperature) : 0.0;
            return p;
        };
        std::vector<double> exact(V * V * V);
        const auto p1 = step_probs(0, 1);
        for (size_t a = 0; a < V; ++a) {
            const auto p2 = step_probs(int32_t(a), 2);
            for (size_t b = 0; b < V; ++b) {
                const auto p3 = step_probs(int32_t(b), 3);
                for (size_t c = 0; c < V; ++c) exact[(a * V + b) * V + c] = p1[a] * p2[b] * p3[c];
            }
        }
        size_t df = 0;
        const double stat = chi_square(exact, counts, n, &df);
        EXPECT_LT(stat, chi_square_bound(df))
            << "temperature " << s.temperature << " top_k " << s.top_k << " df " << df;
        EXPECT_GT(df, 20u);
    }
}

// The adaptive choice on made-up costs: a plain step takes 30 ms, each verified draft adds 5 ms.
// Drafts always kept: drafting goes on at full length. Drafts never kept: drafting stops within a
// few steps and comes back only as rare probes, so a reply of 1000 steps loses little.
TEST(SpecDecoder, DraftsWhileItPaysAndProbesRarelyWhenItDoesNot) {
    for (bool kept : {true, false}) {
        SpecOptions o;
        o.type = SpecType::ngram;
        o.draft_max = 8;
        std::vector<std::unique_ptr<Drafter>> d;
        d.push_back(std::make_unique<GuessDrafter>());
        SpecDecoder spec(o, std::move(d));
        std::vector<int32_t> draft;
        size_t drafting_steps = 0, longest = 0;
        for (size_t step = 0; step < 1000; ++step) {
            const int arm = spec.propose({1, 2, 3}, 8, &draft);
            if (arm < 0) {
                spec.record(-1, 0, 0, 0.030);
                continue;
            }
            ++drafting_steps;
            longest = std::max(longest, draft.size());
            spec.record(arm, draft.size(), kept ? draft.size() : 0, 0.030 + 0.005 * draft.size());
        }
        if (kept) {
            EXPECT_GT(drafting_steps, 990u);
            EXPECT_EQ(longest, 8u);
        } else {
            EXPECT_LT(drafting_steps, 40u);
            EXPECT_GT(drafting_steps, 3u) << "never probed again";
        }
    }
}

// GuessDrafter, free to draft (as prompt lookup is).
class FreeGuessDrafter final : public Drafter {
public:
    const char* name() const override { return "free-guess"; }
    bool costs_nothing() const override { return true; }
    void draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) override {
        guess_.draft(history, max, out);
    }

private:
    GuessDrafter guess_;
};

// An adaptive decoder over one free drafter (as prompt lookup is), drafting up to 8 tokens.
std::unique_ptr<SpecDecoder> free_guess_decoder() {
    SpecOptions o;
    o.type = SpecType::ngram;
    o.draft_max = 8;
    std::vector<std::unique_ptr<Drafter>> d;
    d.push_back(std::make_unique<FreeGuessDrafter>());
    return std::make_unique<SpecDecoder>(o, std::move(d));
}

// A free drafter is verified only where its drafts are kept, and is scored in the shadow elsewhere:
// on a reply that never goes the guessed way it costs almost no verification step; once the reply
// follows the guesses, drafting resumes within a few steps and runs at nearly every step.
TEST(SpecDecoder, AFreeDrafterIsVerifiedOnlyWhereItsShadowDraftsAreKept) {
    const auto decoder = free_guess_decoder();
    SpecDecoder& spec = *decoder;
    const int32_t V = int32_t(MarkovTarget::kVocab);
    std::vector<int32_t> h = {1}, draft;
    size_t verified[2] = {0, 0}, steps[2] = {0, 0}, first_verified_copying = 0;
    for (size_t step = 0; step < 600; ++step) {
        const bool copying = step >= 300;  // the reply goes the guessed way (t + 1) or not (t + 2)
        ++steps[copying];
        const int arm = spec.propose(h, 8, &draft);
        if (arm < 0) {
            spec.record(-1, 0, 0, 0.030);
            h.push_back((h.back() + (copying ? 1 : 2)) % V);
            continue;
        }
        if (copying && verified[1] == 0) first_verified_copying = step;
        ++verified[copying];
        const size_t kept = copying ? draft.size() : 0;
        spec.record(arm, draft.size(), kept, 0.030 + 0.005 * draft.size());
        h.insert(h.end(), draft.begin(), draft.begin() + std::ptrdiff_t(kept));
        h.push_back((h.back() + (copying ? 1 : 2)) % V);
    }
    EXPECT_LT(verified[0], 8u) << "of " << steps[0] << " steps where no draft is kept";
    EXPECT_GT(verified[1], steps[1] * 9 / 10) << "of " << steps[1] << " steps where every draft is kept";
    EXPECT_LT(first_verified_copying, 310u);
}

// A step's time is its cost plus whatever held it up (another process, a page fault). One
// verification step stalled for a second must not make verifying look too dear for good: a reply
// that follows every draft keeps being verified.
TEST(SpecDecoder, OneStalledVerificationStepDoesNotStopDrafting) {
    for (size_t stall_at : {0, 5}) {  // the first verification step, or a later one
        const auto decoder = free_guess_decoder();
        SpecDecoder& spec = *decoder;
        const int32_t V = int32_t(MarkovTarget::kVocab);
        std::vector<int32_t> h = {1}, draft;
        size_t verifications = 0, verified_after_stall = 0, steps_after_stall = 0;
        for (size_t step = 0; step < 400; ++step) {
            const int arm = spec.propose(h, 8, &draft);
            const bool after_stall = verifications > stall_at;
            steps_after_stall += after_stall ? 1 : 0;
            if (arm < 0) {
                spec.record(-1, 0, 0, 0.030);
                h.push_back((h.back() + 1) % V);
                continue;
            }
            verified_after_stall += after_stall ? 1 : 0;
            const double stall = verifications++ == stall_at ? 1.0 : 0.0;
            spec.record(arm, draft.size(), draft.size(), stall + 0.030 + 0.005 * draft.size());
            h.insert(h.end(), draft.begin(), draft.end());
            h.push_back((h.back() + 1) % V);
        }
        EXPECT_GT(steps_after_stall, 0u);
        EXPECT_GT(verified_after_stall, steps_after_stall * 9 / 10) << "stalled verification " << stall_at;
    }
}

// Drafts shorter than draft_min are never verified, so the chosen lengths start there (a length
// below it would draft nothing, measure nothing and never change).
TEST(SpecDecoder, DraftLengthsRespectDraftMin) {
    SpecOptions o;
    o.type = SpecType::ngram;
    o.draft_max = 8;
    o.draft_min = 3;
    std::vector<std::unique_ptr<Drafter>> d;
    d.push_back(std::make_unique<GuessDrafter>());
    SpecDecoder spec(o, std::move(d));
    std::vector<int32_t> draft;
    size_t drafting_steps = 0;
    for (size_t step = 0; step < 50; ++step) {
        const int arm = spec.propose({1, 2, 3}, 8, &draft);
        if (arm < 0) {
            spec.record(-1, 0, 0, 0.030);
            continue;
        }
        ++drafting_steps;
        EXPECT_GE(draft.size(), 3u);
        spec.record(arm, draft.size(), draft.size() / 2, 0.030 + 0.004 * draft.size());
    }
    EXPECT_GT(drafting_steps, 0u);
}

TEST(SpecOptions, ParsesOurNamesAndLlamaCppsAndRejectsTheRest) {
    EXPECT_EQ(parse_spec_type("off"), SpecType::off);
    EXPECT_EQ(parse_spec_type("none"), SpecType::off);
    EXPECT_EQ(parse_spec_type("ngram"), SpecType::ngram);
    EXPECT_EQ(parse_spec_type("ngram-simple"), SpecType::ngram);
    EXPECT_EQ(parse_spec_type("draft"), SpecType::draft);
    EXPECT_EQ(parse_spec_type("ngram-cache,draft-simple"), SpecType::draft);
    EXPECT_THROW(parse_spec_type("draft-eagle3"), Error);
    EXPECT_THROW(parse_spec_type("bogus"), Error);
    EXPECT_THROW(parse_spec_type(""), Error);
    SpecOptions bad;
    bad.type = SpecType::ngram;
    bad.draft_max = 0;
    EXPECT_THROW(SpecDecoder(bad, {}), Error);
}
