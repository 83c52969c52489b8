// DraftPace: how far a server slot drafts. A costly drafter sits out doubling pauses after failed
// drafts; a free one (prompt lookup) is scored in the shadow while paused and resumes as soon as
// its shadow drafts would be kept.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/draft_pace.h"
#include "engine/shadow_draft.h"

namespace cactus {
namespace {

// A reply that copies `source` from `at` on, one token per step, with the pace consulted before
// each token as the server does; `lookup` drafts what the source holds next (a perfect copy).
struct CopyingReply {
    std::vector<int32_t> history;
    std::vector<int32_t> source;
    size_t at = 0;

    std::vector<int32_t> lookup(size_t n) const {
        std::vector<int32_t> d;
        for (size_t i = at; i < source.size() && d.size() < n; ++i) d.push_back(source[i]);
        return d;
    }
    void produce(int32_t token) {
        history.push_back(token);
        ++at;
    }
};

TEST(ShadowDraft, ARunEndsAtTheFirstDifferenceOrWithTheDraft) {
    ShadowDraft shadow;
    ShadowDraft::Run run;
    std::vector<int32_t> history = {1, 2};
    shadow.start({3, 4, 5}, history.size());
    EXPECT_FALSE(shadow.score(history, &run));  // nothing produced yet
    history.push_back(3);
    EXPECT_FALSE(shadow.score(history, &run));
    EXPECT_EQ(shadow.matched(), 1u);
    history.push_back(9);
    ASSERT_TRUE(shadow.score(history, &run));
    EXPECT_EQ(run.drafted, 3u);
    EXPECT_EQ(run.kept, 1u);
    EXPECT_TRUE(run.missed);
    EXPECT_TRUE(shadow.empty());
    shadow.start({7, 8}, history.size());
    history.insert(history.end(), {7, 8, 6});
    ASSERT_TRUE(shadow.score(history, &run));
    EXPECT_EQ(run.kept, 2u);
    EXPECT_FALSE(run.missed);
    shadow.start({1}, history.size());
    EXPECT_FALSE(shadow.score({5}, &run));  // another conversation: dropped unscored
    EXPECT_TRUE(shadow.empty());
}

TEST(DraftPace, ACostlyDrafterSitsOutDoublingPauses) {
    DraftPace pace;
    pace.reset(8, 1, 0.0, false);
    const std::vector<int32_t> history = {1, 2, 3};
    EXPECT_TRUE(pace.drafting_now(history));
    pace.record(8, 0);
    EXPECT_FALSE(pace.wants_shadow());
    size_t skipped = 0;
    while (!pace.drafting_now(history)) ++skipped;
    EXPECT_EQ(skipped, 2u);
    pace.record(4, 0);
    skipped = 0;
    while (!pace.drafting_now(history)) ++skipped;
    EXPECT_EQ(skipped, 4u);
    pace.record(2, 2);  // a success ends the doubling
    pace.record(4, 0);
    skipped = 0;
    while (!pace.drafting_now(history)) ++skipped;
    EXPECT_EQ(skipped, 2u);
}

TEST(DraftPace, LengthFollowsTheAcceptedRun) {
    DraftPace pace;
    pace.reset(16, 2, 0.0, true);
    EXPECT_EQ(pace.length(), 16u);
    pace.record(16, 3);
    EXPECT_EQ(pace.length(), 4u);
    pace.record(4, 4);
    EXPECT_EQ(pace.length(), 8u);
    pace.record(8, 0);
    EXPECT_EQ(pace.length(), 4u);
    EXPECT_TRUE(pace.paused());
}

// A free drafter paused on a reply of new text (shadow drafts never match) verifies nothing; once
// the reply copies, it resumes after the first shadow draft that would have been kept.
TEST(DraftPace, AFreeDrafterResumesAsSoonAsItsShadowDraftsWouldBeKept) {
    DraftPace pace;
    pace.reset(8, 1, 0.0, true);
    std::vector<int32_t> history = {5, 6, 7};
    EXPECT_TRUE(pace.drafting_now(history));
    pace.record(8, 0);
    ASSERT_TRUE(pace.paused());
    // New text: the shadow guesses 900+, the reply writes 100+.
    size_t verified = 0;
    for (int32_t t = 0; t < 200; ++t) {
        if (pace.drafting_now(history)) ++verified;
        if (pace.wants_shadow()) pace.set_shadow({900 + t, 901 + t}, history);
        history.push_back(100 + t);
    }
    EXPECT_EQ(verified, 0u);
    EXPECT_TRUE(pace.paused());
    // The reply starts copying a passage the lookup finds.
    CopyingReply reply;
    reply.history = history;
    for (int32_t t = 0; t < 64; ++t) reply.source.push_back(2000 + t);
    size_t steps_to_resume = 0;
    while (!pace.drafting_now(reply.history)) {
        ASSERT_LT(++steps_to_resume, 24u) << "still in the shadow after the reply copied this long";
        if (pace.wants_shadow()) pace.set_shadow(reply.lookup(pace.length()), reply.history);
        reply.produce(reply.source[reply.at]);
    }
    EXPECT_FALSE(pace.paused());
    EXPECT_GE(pace.length(), 2u);
}

// A shadow draft that keeps a token now and then (common words in chat) does not resume
// verification while most shadow runs end at their first token.
TEST(DraftPace, OccasionalOneTokenMatchesDoNotResumeVerifying) {
    DraftPace pace;
    pace.reset(16, 1, 0.0, true);
    std::vector<int32_t> history = {1};
    EXPECT_TRUE(pace.drafting_now(history));
    pace.record(16, 0);
    size_t verified = 0, shadows = 0;
    for (int32_t t = 0; t < 400; ++t) {
        if (pace.drafting_now(history)) {
            ++verified;
            pace.record(pace.length(), 0);
        }
        const int32_t next = 100 + t;
        if (pace.wants_shadow()) {
            // Every fourth shadow draft guesses the next token, then goes wrong.
            const bool lucky = (shadows++ % 4) == 3;
            pace.set_shadow({lucky ? next : 7, 8, 9, 10}, history);
        }
        history.push_back(next);
    }
    EXPECT_EQ(verified, 0u);
}

TEST(DraftPace, AShadowOfAnotherConversationIsDropped) {
    DraftPace pace;
    pace.reset(4, 1, 0.0, true);
    std::vector<int32_t> history = {1, 2, 3, 4, 5};
    pace.drafting_now(history);
    pace.record(4, 0);
    pace.set_shadow({6, 7}, history);
    EXPECT_FALSE(pace.wants_shadow());
    const std::vector<int32_t> shorter = {9};
    EXPECT_FALSE(pace.drafting_now(shorter));
    EXPECT_TRUE(pace.wants_shadow());
}

}  // namespace
}  // namespace cactus
