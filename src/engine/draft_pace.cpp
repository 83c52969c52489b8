#include "engine/draft_pace.h"

#include <algorithm>
#include <utility>

namespace cactus {

namespace {

// The longest pause of a costly drafter, in steps.
constexpr size_t kLongestPause = 256;
// Weight of earlier runs in a free drafter's acceptance estimate: about the last five drafts count,
// so it follows a reply from copied passages to new text and back (SpecDecoder's decay).
constexpr double kAcceptanceDecay = 0.8;

}  // namespace

void DraftPace::reset(size_t max_length, size_t min_length, double min_rate, bool free_drafts) {
    *this = DraftPace();
    min_rate_ = min_rate;
    free_ = free_drafts;
    max_ = std::max<size_t>(max_length, 1);
    min_ = std::max<size_t>(std::min(min_length, max_), 1);
    length_ = max_;
}

bool DraftPace::drafting_now(const std::vector<int32_t>& history) {
    if (!paused_) return true;
    if (free_) {
        score_shadow(history);
        return !paused_;
    }
    if (--steps_left_ == 0) paused_ = false;
    return false;
}

void DraftPace::set_shadow(std::vector<int32_t> draft, const std::vector<int32_t>& history) {
    if (!wants_shadow()) return;
    if (draft.size() > length_) draft.resize(length_);
    shadow_.start(std::move(draft), history.size());
}

void DraftPace::record(size_t drafted, size_t accepted) {
    if (drafted == 0) return;
    note_run(accepted, accepted < drafted);
    if (failed(drafted, accepted)) {
        length_ = std::max(min_, length_ / 2);
        paused_ = true;
        if (!free_) {
            pause_span_ = pause_span_ == 0 ? 2 : std::min(pause_span_ * 2, kLongestPause);
            steps_left_ = pause_span_;
        }
        return;
    }
    pause_span_ = 0;
    length_ = accepted == drafted ? std::min(max_, length_ * 2) : std::clamp(accepted + 1, min_, max_);
}

bool DraftPace::failed(size_t drafted, size_t accepted) const {
    return accepted == 0 || static_cast<double>(accepted) < min_rate_ * static_cast<double>(drafted);
}

void DraftPace::note_run(size_t kept, bool missed) {
    kept_ = kAcceptanceDecay * kept_ + static_cast<double>(kept);
    missed_ = kAcceptanceDecay * missed_ + (missed ? 1.0 : 0.0);
}

// Whether a draft of length_ tokens is expected to keep at least one: a run of kept tokens ends at
// the first miss, each kept with probability a, so a + a^2 + ... + a^length_ tokens on average.
bool DraftPace::shadow_keeps_tokens() const {
    const double a = kept_ / (kept_ + missed_);
    double expected = 0.0, a_pow = 1.0;
    for (size_t i = 0; i < length_; ++i) {
        a_pow *= a;
        expected += a_pow;
    }
    return expected >= 1.0;
}

// Scores the shadow draft against what the reply produced since it was made: a run that would have
// passed a verification and leaves the estimate expecting kept tokens resumes verifying.
void DraftPace::score_shadow(const std::vector<int32_t>& history) {
    ShadowDraft::Run run;
    if (!shadow_.score(history, &run)) return;
    note_run(run.kept, run.missed);
    if (failed(run.drafted, run.kept) || !shadow_keeps_tokens()) return;
    paused_ = false;
    length_ = run.kept == run.drafted ? std::min(max_, length_ * 2) : std::clamp(run.kept + 1, min_, max_);
}

}  // namespace cactus
