#pragma once
// Speculative decoding: drafters propose the tokens likely to come next, the model scores them all
// in one multi-token step (the batched path prefill uses, whose rows are bit for bit those of
// one-token steps), and draft_acceptance.h keeps those the model itself would have produced; the
// rows of the others are dropped from the cache. Greedy replies are the same tokens as plain
// decoding; sampled ones follow the same distribution.
//
// Which drafter runs, and how far it drafts, adapts to what each step measured. Prompt lookup, which
// costs nothing to draft, is verified only on steps where its measured acceptance makes that pay
// and is scored in the shadow otherwise; a draft model whose tokens per second fall below plain
// decoding's is switched off for a while (twice as long each time it fails again). So a
// conversation that nothing predicts decodes almost as plainly.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/shadow_draft.h"
#include "engine/spec_options.h"
#include "ops/top_candidates.h"

namespace cactus {

class GgufFile;
class Model;
class Tokenizer;

// Proposes tokens to follow a conversation.
class Drafter {
public:
    virtual ~Drafter() = default;
    virtual const char* name() const = 0;
    // Up to `max` tokens likely to follow `history` (the conversation's ids in order; < 0: image
    // rows) into *out (cleared first); none when it has no guess.
    virtual void draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) = 0;
    // Drafting costs nothing next to a step of the model: on steps where verifying would not pay,
    // its drafts are still made and scored against the tokens the reply then produces, so its
    // acceptance stays measured without verification steps (SpecDecoder).
    virtual bool costs_nothing() const { return false; }
};

// Prompt lookup (Saxena 2023; llama.cpp's ngram-simple): the longest suffix of the history, from
// ngram_max down to ngram_min tokens, found earlier in the history; the tokens that followed that
// occurrence are the draft: the one just after where the previous draft came from (a copy going on),
// else the latest; a token the reply replaced at an earlier draft's first miss, and then went on
// copying (a rename), is copied as its replacement. Free to compute; strong where replies copy their input (code edits,
// summaries that quote, repeated structure).
class NgramDrafter final : public Drafter {
public:
    NgramDrafter(size_t ngram_min, size_t ngram_max);
    const char* name() const override { return "ngram"; }
    bool costs_nothing() const override { return true; }
    void draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) override;

private:
    static constexpr size_t kNearTokens = 32;  // how far past the previous draft's source a copy may resume
    static constexpr size_t kMaxSubstitutions = 64;
    size_t find_match(const std::vector<int32_t>& history, size_t n) const;
    void learn_substitution(const std::vector<int32_t>& history);
    void confirm_rename(const std::vector<int32_t>& history);
    int32_t substitute(int32_t id) const;

    size_t ngram_min_, ngram_max_;
    size_t cursor_ = SIZE_MAX;          // history index just past the source of the previous draft; SIZE_MAX: none
    std::vector<int32_t> last_source_;  // the source tokens the previous draft copied
    size_t last_size_ = 0;              // the history's length at the previous draft
    std::unordered_map<int32_t, int32_t> substitutions_;  // source token -> the token the reply has instead
    struct PendingRename {  // a difference whose next token decides whether it is a rename
        int32_t from = -1, to = -1;
        int32_t follow = -1;   // the source's token after `from`
        size_t follow_at = 0;  // the history index of the reply's token after `to`; 0: none pending
    };
    PendingRename pending_;
};

// A small model with the same vocabulary drafting greedily; it keeps its own cache of the history
// and brings it up to date (longest common prefix, then the rest) before each draft.
class ModelDrafter final : public Drafter {
public:
    // Loads the draft model; throws cactus::Error when its vocabulary is not `target`'s (size, or
    // the text of any token, or BOS/EOS ids).
    ModelDrafter(const std::string& path, const Tokenizer& target, size_t n_ctx, int n_threads);
    ~ModelDrafter() override;
    const char* name() const override { return "draft"; }
    void draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) override;

private:
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> cached_;  // ids in the draft model's cache, in order
    std::vector<float> logits_;
};

// Throws cactus::Error unless `draft` can draft for `target`: the same vocabulary size (up to
// llama.cpp's tolerance of 128 padding tokens), the same token texts and the same BOS/EOS.
void check_draft_vocabulary(const Tokenizer& target, const Tokenizer& draft, const std::string& draft_name);

// What one verification step needs from the model being decoded.
class SpecTarget {
public:
    virtual ~SpecTarget() = default;
    // Appends ids[0..n) to the cache and writes the logits after each of them ([n, n_vocab]).
    virtual void append_scored(const int32_t* ids, size_t n, std::vector<float>* logits) = 0;
    // Keeps the first n cached tokens (drops the rows of rejected drafts).
    virtual void keep(size_t n) = 0;
    virtual size_t n_cached() const = 0;
    // Most tokens the next step can append (1..wanted). A cache that is full compacts now, before
    // the step, so no compaction falls inside it and dropping its rejected rows stays exact.
    virtual size_t reserve(size_t wanted) = 0;
    virtual size_t max_step() const = 0;  // most tokens one step takes
    // A plain step of one token whose logits stay on the device: the next token's k largest logits
    // and normalizer (Model::forward_top, `banned` -inf first; may be null); false when the model
    // cannot (nothing appended then).
    virtual bool append_top(int32_t id, size_t k, const std::vector<int32_t>* banned, TopCandidates* out) {
        return false;
    }
    // The logits of the last append_top() step ([n_vocab]).
    virtual void last_logits(std::vector<float>* logits) { fail("SpecTarget: no device logits to fetch"); }
};

// Counters of one reply (CompletionMetrics takes them).
struct SpecCounters {
    size_t drafted = 0;   // tokens proposed and verified
    size_t accepted = 0;  // of those, kept
    size_t steps = 0;     // model steps (plain and verifying)
};

// Chooses a drafter and a draft length per step from what earlier steps measured, across replies.
class SpecDecoder {
public:
    // Throws cactus::Error when the draft model cannot be loaded or does not match `target`.
    SpecDecoder(const SpecOptions& options, const Tokenizer& target, size_t n_ctx, int n_threads);
    // With the given drafters (tests), tried in that order until measured.
    SpecDecoder(const SpecOptions& options, std::vector<std::unique_ptr<Drafter>> drafters);
    ~SpecDecoder();
    const SpecOptions& options() const { return options_; }

    // A draft to follow `history` (its last token is the one about to be appended), at most `max`
    // tokens, into *out; empty = decode this step plainly. Returns the drafter used (-1: none).
    int propose(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out);
    // What the step measured: the drafter propose() returned (-1 for a plain step), tokens drafted,
    // accepted, and the step's seconds (drafting and verifying).
    void record(int drafter, size_t drafted, size_t accepted, double seconds);
    const char* drafter_name(int drafter) const;
    bool drafting() const { return !arms_.empty(); }

private:
    using Clock = std::chrono::steady_clock;
    struct Arm {  // one drafter and what it measured
        std::unique_ptr<Drafter> drafter;
        double tokens_per_s = 0.0;        // moving average over its steps; 0 = not measured yet
        double kept = 1.0, missed = 1.0;  // decaying counts of kept drafts and of runs ended by a miss
        double draft_s_per_token = 0.0;   // moving average of its drafting time per drafted token
        size_t off_until = 0;             // switched off until this many steps have passed
        size_t off_span = 0;              // steps of the last switch-off (doubles on each failure)
        size_t samples = 0;               // steps measured since it (re)started
        bool probe = false;               // its next step is a probe after a switch-off
        ShadowDraft shadow;               // a draft made but not verified (costs_nothing drafters), being scored
    };
    size_t best_length(const Arm& arm, size_t max) const;
    bool verifying_pays(const Arm& arm, size_t length) const;
    void score_shadow(Arm& arm, const std::vector<int32_t>& history);
    static void note_run(Arm& arm, size_t kept, bool missed);
    double step_seconds(size_t n) const;
    void switch_off(Arm& arm);

    SpecOptions options_;
    std::vector<Arm> arms_;
    double plain_s_ = 0.0;        // moving average of a plain step's seconds
    double extra_s_ = 0.0;        // moving average of the seconds each drafted token adds to a step
    std::vector<double> step_s_;  // [n] moving average of a verification step of n tokens (0: none yet)
    double draft_seconds_ = 0.0;  // drafting time of the proposal in flight
    size_t steps_ = 0;
};

class Sampler;

// The tokens of one reply, one at a time: sampled from the model's next-token logits (plain), or
// taken from a verification step, whose rows are judged one by one as the reply asks for them (so
// the sampler's history, penalties and bans are those of plain decoding at each token).
class TokenSource {
public:
    // `history`: the prompt's ids (the drafters' context); `logits`: the next-token logits after it
    // (the prefill's). spec may be null (plain decoding).
    TokenSource(SpecTarget& target, SpecDecoder* spec, Sampler& sampler, std::vector<int32_t> history,
                std::vector<float> logits);
    // The reply's next token; the sampler's last probability is its probability.
    int32_t next();
    // The reply continues after `token` (the one next() gave): appends it to the cache (with a
    // draft when a drafter has one) unless it is there already.
    void advance(int32_t token);
    // The reply ended after `emitted` tokens: drops cached rows of drafts it did not use, so the
    // cache holds the prompt and the reply (without its last token, as plain decoding leaves it).
    void finish(size_t prompt_tokens, size_t emitted);
    const SpecCounters& counters() const { return counters_; }
    // Plain decoding samples from k candidates computed on the device (Sampler::sample_from_top)
    // and fetches a step's logits only when they cannot give sample()'s token; 0 = off. Ignored
    // with a drafter. `banned` (may be null): the sampler's bans for the whole reply (ignore_eos),
    // applied where the candidates are taken.
    void sample_on_device(size_t k, const std::vector<int32_t>* banned) {
        top_k_ = spec_ == nullptr ? k : 0;
        banned_ = banned;
    }

private:
    using Clock = std::chrono::steady_clock;
    void end_verification(size_t accepted);

    SpecTarget& target_;
    SpecDecoder* spec_;
    Sampler& sampler_;
    std::vector<int32_t> history_;
    std::vector<float> logits_;  // [n_vocab] next-token logits (plain), or scratch of a row
    TopCandidates top_;          // the next token's candidates (plain, sample_on_device) when have_top_
    bool have_top_ = false;
    size_t top_k_ = 0;
    const std::vector<int32_t>* banned_ = nullptr;  // sample_on_device's bans
    std::vector<float> rows_;                       // [1 + drafts, n_vocab] the verification step's logits
    std::vector<int32_t> drafts_;
    size_t n_vocab_ = 0;
    size_t judged_ = 0;          // drafts judged so far
    size_t base_ = 0;            // cached tokens before the verification step
    int drafter_ = -1;           // of the verification in progress; -1: none
    bool in_cache_ = false;      // the token next() gave last is already in the cache
    double step_seconds_ = 0.0;  // drafting and scoring of the verification in progress
    SpecCounters counters_;
};

}  // namespace cactus
