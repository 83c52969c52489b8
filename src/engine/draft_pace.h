#pragma once
// How far one sequence of a batch drafts with one drafter (the server's slots; SpecDecoder paces a
// single conversation by measured step costs instead). The length follows the accepted run
// (doubling after a draft accepted whole). A failed draft (nothing accepted, or less than min_rate
// of it) pauses the drafter:
//  - a drafter that costs something to draft (a draft model) sits out some steps, twice as many each
//    time it fails in a row;
//  - a free one (prompt lookup) keeps drafting in the shadow: each draft is scored against the
//    tokens the reply then produces, as a verification would have judged it, and verification
//    resumes as soon as the shadow drafts are expected to keep at least one token. A reply that
//    stops copying its input costs no verification steps, and one that starts copying again is
//    drafted for within a draft or two, not after a blind pause of up to 256 steps.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/shadow_draft.h"

namespace cactus {

class DraftPace {
public:
    // free_drafts: drafting costs nothing next to a step (shadow drafts instead of pauses).
    void reset(size_t max_length, size_t min_length, double min_rate, bool free_drafts);
    // Whether the sequence drafts and verifies this step. `history`: its ids, the last one about to
    // be appended; a free drafter's shadow draft is scored against it first. A paused costly
    // drafter counts down its pause.
    bool drafting_now(const std::vector<int32_t>& history);
    // A paused free drafter without a shadow draft: one to follow `history` is wanted this step.
    bool wants_shadow() const { return free_ && paused_ && shadow_.empty(); }
    // The shadow draft made to follow `history` (at most length() tokens; empty: no guess).
    void set_shadow(std::vector<int32_t> draft, const std::vector<int32_t>& history);
    size_t length() const { return length_; }
    // A verified draft: `drafted` tokens, of which the first `accepted` were kept.
    void record(size_t drafted, size_t accepted);
    bool paused() const { return paused_; }

private:
    bool failed(size_t drafted, size_t accepted) const;
    void note_run(size_t kept, bool missed);
    bool shadow_keeps_tokens() const;
    void score_shadow(const std::vector<int32_t>& history);

    size_t max_ = 1, min_ = 1;
    double min_rate_ = 0.0;
    bool free_ = false;
    size_t length_ = 1;      // tokens to draft next
    bool paused_ = false;    // not verifying: counting down (costly) or in the shadow (free)
    size_t steps_left_ = 0;  // costly drafter: paused steps still to sit out
    size_t pause_span_ = 0;  // costly drafter: the last pause's steps (doubles with each failure)
    double kept_ = 1.0;      // free drafter: decaying counts of drafted tokens kept
    double missed_ = 1.0;    // and of runs ended by a miss (verified and shadow drafts alike)
    ShadowDraft shadow_;     // free drafter, paused: the draft being scored
};

}  // namespace cactus
