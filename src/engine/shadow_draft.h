#pragma once
// A draft made but not verified, scored against the tokens the reply then produces as a
// verification would have judged it: its run of kept tokens ends at the first token that differs
// (a miss) or with the draft. Drafters that cost nothing (prompt lookup) are measured this way on
// the steps they are not verified: SpecDecoder for one conversation, DraftPace per server slot.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cactus {

class ShadowDraft {
public:
    struct Run {
        size_t drafted = 0;   // the draft's tokens
        size_t kept = 0;      // of those, the run the reply produced
        bool missed = false;  // the run ended at a token that differs (else with the draft)
    };
    bool empty() const { return tokens_.empty(); }
    size_t matched() const { return matched_; }  // tokens the reply produced so far
    // The draft made to follow `history` (its first token stands for index history_size).
    void start(std::vector<int32_t> tokens, size_t history_size);
    void clear();
    // Scores the draft against `history` (the conversation's ids so far): true, with *run, once its
    // run has ended; the draft is cleared then. A history shorter than where the draft started
    // (another conversation) drops it unscored.
    bool score(const std::vector<int32_t>& history, Run* run);

private:
    std::vector<int32_t> tokens_;
    size_t at_ = 0;       // the history index of the first token
    size_t matched_ = 0;  // of the tokens, those the reply produced so far
};

}  // namespace cactus
