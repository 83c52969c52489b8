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

#include "engine/draft_pace.h"
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
    // Prompt lookup's draft of up to `max` tokens to follow the slot's `history` (a shadow draft,
    // not verified: DraftPace scores it).
    void lookup(int seq, const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out);
    // The slot starts another conversation: its lookup forgets the renames it learnt.
    void restart(int seq);

private:
    // Brings each request's sequence in the draft model up to its history; returns the requests
    // whose last logits are in last_logits_ (in order), dropping those the draft model cannot take.
    std::vector<DraftRequest*> catch_up(const std::vector<DraftRequest*>& requests);
    void draft_with_model(const std::vector<DraftRequest*>& requests);

    NgramDrafter& ngram(int seq);

    SpecOptions options_;
    // Per slot: prompt lookup follows where its previous draft copied from and learns the reply's
    // renames, state of one conversation.
    std::vector<std::unique_ptr<NgramDrafter>> ngrams_;
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
