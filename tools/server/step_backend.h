#pragma once
// What the scheduler needs from the engine: N sequences, each with its own cache of token ids, and
// one step() that appends a run of tokens to each of several sequences (a prefill chunk, or the
// token sampled last) and returns the next-token logits of those that ask.
//
// Two implementations: make_batched() holds one model with N sequences and runs each step as one
// Batch (a sequence id per token: every slot's tokens in one forward call, one weight read; on a
// GPU the slots' candidates come back instead of their logits: Engine::samples_on_device);
// make_engine_per_slot() keeps one Engine per sequence and runs them one after another (the
// interim design before the engine had batches; kept for comparisons: --engine-per-slot).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "ops/top_candidates.h"
#include "sampling/grammar.h"

namespace cactus::server {

// The prompt id of rows that never match a cached row (bidirectional spans: recomputed whole);
// other rows carry ids derived from their input's digest (media.h).
constexpr int32_t kAnonymousRow = -1;

struct SeqStep {
    int seq = 0;
    std::vector<int32_t> tokens;     // [n] appended at the sequence's next positions; < 0: row i of embd
    const float* embd = nullptr;     // [n, n_embd] image rows, read where tokens < 0 (nullptr: text only)
    const int32_t* group = nullptr;  // [n] bidirectional spans (Batch::group), or nullptr
    bool want_logits = false;
    bool all_logits = false;  // with want_logits: the logits after every token (verifying a draft)
    // With want_logits and not all_logits: how many candidates the slot's sampler needs
    // (Sampler::top_candidates_wanted; 0: it needs the logits) and the bans it will draw under.
    // A backend that samples where the logits are gives `top` instead of `logits`; fetch_logits()
    // brings the row when the candidates cannot tell the token (Sampler::sample_from_top).
    size_t top_k = 0;
    const std::vector<int32_t>* banned = nullptr;
    std::vector<float>
        logits;         // [n_vocab] next-token logits after the last token, when wanted; [n, n_vocab] with all_logits
    TopCandidates top;  // the candidates, when given (top.ids not empty): then `logits` is empty
};

class StepBackend {
public:
    virtual ~StepBackend() = default;

    virtual size_t n_seqs() const = 0;
    // Tokenizer, chat template and model facts (shared by every sequence).
    virtual const Engine& engine() const = 0;
    // The grammar engine's vocabulary (built on first use: callers serialize, see constraint.cpp).
    virtual GrammarVocab& grammar_vocab() = 0;
    // The ids whose keys/values sequence `seq` holds, in order.
    virtual const std::vector<int32_t>& cached_tokens(int seq) const = 0;
    // Keeps the longest cached prefix of `prompt` in sequence `seq` and returns its length (the
    // last prompt token is always recomputed). Throws cactus::Error on an invalid prompt.
    virtual size_t begin(int seq, const std::vector<int32_t>& prompt) = 0;
    // Drops everything sequence `seq` holds; returns how many tokens that was.
    virtual size_t erase(int seq) = 0;
    // Keeps the first n tokens sequence `seq` holds (the rows of rejected drafts go); where the
    // cache can only restore an earlier state, the tokens from there to n are computed again.
    virtual void keep(int seq, size_t n) = 0;
    // Appends each item's tokens to its sequence (at most one item per sequence). An item may be
    // cut short (its cache takes fewer tokens this step, e.g. a sliding window): its tokens are
    // then resized to what was appended and want_logits and all_logits cleared.
    virtual void step(std::vector<SeqStep>& batch) = 0;
    // The logits of an item of the last step() that came with candidates (item.top); only until
    // the next step.
    virtual void fetch_logits(SeqStep& item) = 0;
    // Most tokens one step takes over all items.
    virtual size_t max_step_tokens() const = 0;
    // Tokens that may still be appended to sequence `seq`.
    virtual size_t context_room(int seq) const = 0;
    virtual size_t n_ctx() const = 0;  // per sequence
    // Whether step() gives candidates instead of logits rows where the items ask (SeqStep::top_k).
    virtual bool samples_on_device() const { return false; }
};

// One model with n_seqs sequences; every step is one forward call.
std::unique_ptr<StepBackend> make_batched(const std::string& model_path, const EngineOptions& options, size_t n_seqs);
// One Engine per sequence, each with its own copy of the weights.
std::unique_ptr<StepBackend> make_engine_per_slot(const std::string& model_path, const EngineOptions& options,
                                                  size_t n_seqs);

}  // namespace cactus::server
