#pragma once
// Drafts for the server's slots (speculative decoding; src/engine/speculative.h has the method).
// Each decoding slot may append its last token and a draft of k tokens in the same batched step;
// the scheduler judges the drafts against the logits of every row (sampling/draft_acceptance.h),
// emits the accepted tokens and the model's own next one, and drops the rejected rows. Prompt
// lookup drafts from the slot's own history, for free; a draft model holds one sequence per slot
// and drafts for every slot that asks in the same batched steps.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/spec_options.h"
#include "engine/speculative.h"
#include "step_backend.h"

namespace cactus::server {

enum class DraftSource { ngram = 0, model = 1, none = 2 };

struct DraftRequest {
    int seq = 0;
    std::vector<int32_t> history;  // the slot's ids in order; the last is the token about to be appended
    size_t max_ngram = 0;          // most tokens prompt lookup may draft (0: not this step)
    size_t max_model = 0;          // most tokens the draft model may draft (0: not this step)
    std::vector<int32_t> tokens;   // the draft; empty: the slot decodes plainly this step
    DraftSource source = DraftSource::none;
};

// How far one slot drafts with one drafter, from what its last verifications accepted: the length
// follows the accepted run (doubling after a draft accepted whole), and a failed draft (nothing
// accepted, or less than min_rate of it) pauses the drafter for some steps, twice as many each
// time in a row, so a reply that nothing predicts decodes almost as plainly as without speculation.
class DraftPace {
public:
    void reset(size_t max_length, size_t min_length, double min_rate);
    // Whether the slot drafts this step (a paused step counts down the pause).
    bool drafting_now();
    size_t length() const { return length_; }
    void record(size_t drafted, size_t accepted);

private:
    size_t max_ = 1, min_ = 1;
    double min_rate_ = 0.0;
    size_t length_ = 1;      // tokens to draft next
    size_t paused_ = 0;      // steps left without drafting
    size_t pause_span_ = 0;  // the last pause's steps (doubles with each failure in a row)
};

class SlotDrafter {
public:
    // draft_model: one sequence per slot over a model with the served model's vocabulary
    // (load_draft_model), or nullptr: prompt lookup only.
    SlotDrafter(const SpecOptions& options, std::unique_ptr<StepBackend> draft_model);
    const SpecOptions& options() const { return options_; }
    bool has_model() const { return model_ != nullptr; }
    // Fills each request's tokens: prompt lookup first (free, and strongest where replies copy
    // their input), then the draft model for the requests prompt lookup leaves without a draft.
    void draft(std::vector<DraftRequest>& requests);

private:
    // Brings each request's sequence in the draft model up to its history; returns the requests
    // whose last logits are in last_logits_ (in order), dropping those the draft model cannot take.
    std::vector<DraftRequest*> catch_up(const std::vector<DraftRequest*>& requests);
    void draft_with_model(const std::vector<DraftRequest*>& requests);

    SpecOptions options_;
    NgramDrafter ngram_;
    std::unique_ptr<StepBackend> model_;
    std::vector<std::vector<float>> last_logits_;  // per request of catch_up(): [n_vocab]
};

// Loads the draft model with one sequence per slot of `target` (its context as large) and checks
// that its vocabulary is the target's; throws cactus::Error naming the file otherwise.
std::unique_ptr<StepBackend> load_draft_model(const SpecOptions& options, const StepBackend& target, int n_threads);

// llama-server's names of the drafters on (generation settings' speculative.types): none,
// ngram-simple, or draft-simple,ngram-simple.
const char* llama_spec_types(SpecType type);

}  // namespace cactus::server
