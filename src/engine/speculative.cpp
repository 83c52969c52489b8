#include "engine/speculative.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "sampling/draft_acceptance.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

namespace {

// llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE: vocabularies padded to a multiple differ in size.
constexpr size_t kVocabSizeSlack = 128;
// Moving averages of tokens per second weigh the latest step this much.
constexpr double kRateWeight = 0.25;
// A drafter is kept while its tokens per second stay above plain decoding's times this margin:
// below it, verifying costs more than it saves.
constexpr double kKeepMargin = 1.0;
// Steps a failing drafter first sits out, and the most (doubling in between).
constexpr size_t kFirstOffSpan = 16;
constexpr size_t kMaxOffSpan = 512;
// Steps a drafter runs at its start before its speed is judged: one unlucky draft does not switch
// it off. After a switch-off, its one probe step is judged at once.
constexpr size_t kJudgeAfter = 2;
// What a verified draft adds to a step, as a fraction of a plain step, until measured: a quarter to a
// half on the CPU tables measured (tests/tools/spec_cost_probe.cpp, qwen2.5-coder 0.5b/1.5b).
constexpr double kExtraPrior = 0.3;
// A free drafter's draft is verified when the expected tokens per second of the step beat plain
// decoding's by this factor: the estimates behind it (acceptance, step costs) are averages of few,
// noisy samples, and a verification that does not pay costs a whole step. At 1.1, chat replies and
// a docstring edit (lookup acceptance 0.4-0.5) decoded 4-12% slower than plain; at 1.25 within
// noise of plain, with the copying replies as fast (bench/compare_spec.py, Zen 3, 1 and 2 threads).
constexpr double kPayMargin = 1.25;
// Drafts of a drafter's first step after a switch-off: the cheapest verification step (2 tokens)
// that measures whether it pays again.
constexpr size_t kProbeLength = 1;
// Weight of earlier steps in a drafter's acceptance estimate (per step): about the last five steps
// count, so the estimate follows a reply from copied passages to new text and back.
constexpr double kAcceptanceDecay = 0.8;

double blend(double average, double sample) {
    return average == 0.0 ? sample : average + kRateWeight * (sample - average);
}

// A step's time is its cost plus whatever held it up (another process, a page fault), never less
// than the cost: a time estimate follows a faster sample by kRateWeight and a slower one by a
// tenth of that, counting at most twice the estimate (or twice `guess`, the model's estimate, for
// the first sample of a step size; with no guess, as for the first plain step, the sample is taken
// as it is, and a faster step soon brings it down). Averaged plainly, one step stalled for a second made its step
// size, and every size estimated from it, look too dear to be tried again for the rest of the
// session, so drafting stopped for good.
double settle(double average, double sample, double guess) {
    const double base = average > 0.0 ? average : guess;
    if (base <= 0.0) return sample;
    const double capped = std::min(sample, 2.0 * base);
    if (average == 0.0) return capped;
    const double weight = capped < average ? kRateWeight : 0.1 * kRateWeight;
    return average + weight * (capped - average);
}

}  // namespace

// ---- prompt lookup ----

NgramDrafter::NgramDrafter(size_t ngram_min, size_t ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {
    if (ngram_min_ == 0 || ngram_max_ < ngram_min_)
        fail("ngram drafter: sizes %zu..%zu are not 1 <= min <= max", ngram_min_, ngram_max_);
}

void NgramDrafter::draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) {
    out->clear();
    learn_substitution(history);
    last_source_.clear();
    last_size_ = history.size();
    const size_t n_hist = history.size();
    for (size_t n = std::min(ngram_max_, n_hist > 0 ? n_hist - 1 : 0); n >= ngram_min_ && n > 0; --n) {
        const int32_t* key = history.data() + n_hist - n;
        if (std::any_of(key, key + n, [](int32_t id) { return id < 0; })) continue;  // image rows never match
        const size_t start = find_match(history, n);
        if (start == SIZE_MAX) continue;
        for (size_t i = start + n; i < n_hist && out->size() < max && history[i] >= 0; ++i) {
            last_source_.push_back(history[i]);
            out->push_back(substitute(history[i]));
        }
        if (!out->empty()) {
            cursor_ = start + n + out->size();
            return;
        }
    }
}

int32_t NgramDrafter::substitute(int32_t id) const {
    const auto it = substitutions_.find(id);
    return it == substitutions_.end() ? id : it->second;
}

// The reply went on differently from the previous draft at its first wrong token: where the
// source had x the reply has r. A rename (lst -> samples) repeats that at every later x, so later
// drafts copy x as r. It is learnt once the reply's token after r is the source's token after x
// (the copy goes on past the difference): a reply that merely went its own way there would
// otherwise plant wrong substitutions that spoil every later match of x.
void NgramDrafter::learn_substitution(const std::vector<int32_t>& history) {
    if (history.size() < last_size_) {  // another conversation
        substitutions_.clear();
        pending_ = PendingRename{};
        cursor_ = SIZE_MAX;
        return;
    }
    confirm_rename(history);
    for (size_t j = 0; j < last_source_.size() && last_size_ + j < history.size(); ++j) {
        const int32_t x = last_source_[j], r = history[last_size_ + j];
        if (r == substitute(x)) continue;
        if (r == x) {
            substitutions_.erase(x);
        } else if (r >= 0 && j + 1 < last_source_.size()) {
            pending_ = PendingRename{x, r, last_source_[j + 1], last_size_ + j + 1};
            confirm_rename(history);
        }
        return;
    }
}

// Learns the pending rename when the reply's token after it is known: if it is the source's next
// token, the copy went on past the difference.
void NgramDrafter::confirm_rename(const std::vector<int32_t>& history) {
    if (pending_.follow_at == 0 || pending_.follow_at >= history.size()) return;
    const int32_t next = history[pending_.follow_at];
    if ((next == pending_.follow || next == substitute(pending_.follow)) &&
        (substitutions_.size() < kMaxSubstitutions || substitutions_.count(pending_.from) != 0)) {
        substitutions_[pending_.from] = pending_.to;
    }
    pending_ = PendingRename{};
}

// Where the last n tokens of the history occurred before (the start of the occurrence), SIZE_MAX
// when nowhere; earlier tokens are compared after the learnt substitutions. A reply that copies its
// input (an edit, a quote) moves through the source in order: an occurrence just after where the
// last draft came from continues that copy, so it comes first (the latest occurrence of a short
// suffix like ", window" is often elsewhere); then the latest.
size_t NgramDrafter::find_match(const std::vector<int32_t>& history, size_t n) const {
    const size_t n_hist = history.size();
    const int32_t* key = history.data() + n_hist - n;
    const size_t last_start = n_hist - n;  // the suffix itself
    const auto matches = [&](size_t start) {
        for (size_t i = 0; i < n; ++i)
            if (substitute(history[start + i]) != key[i]) return false;
        return true;
    };
    if (cursor_ < last_start) {
        const size_t near_begin = cursor_ > n ? cursor_ - n : 0;
        const size_t near_end = std::min(last_start, cursor_ + kNearTokens);
        for (size_t start = near_begin; start < near_end; ++start)
            if (matches(start)) return start;
    }
    for (size_t start = last_start; start-- > 0;)
        if (matches(start)) return start;
    return SIZE_MAX;
}

// ---- draft model ----

void check_draft_vocabulary(const Tokenizer& target, const Tokenizer& draft, const std::string& draft_name) {
    const size_t nt = target.vocab_size(), nd = draft.vocab_size();
    const size_t diff = nt > nd ? nt - nd : nd - nt;
    if (diff > kVocabSizeSlack)
        fail("draft model %s: its vocabulary has %zu tokens, the model's %zu (a drafter needs the same vocabulary)",
             draft_name.c_str(), nd, nt);
    if (target.bos_id() != draft.bos_id() || target.eos_id() != draft.eos_id())
        fail("draft model %s: its BOS/EOS ids (%d/%d) differ from the model's (%d/%d)", draft_name.c_str(),
             draft.bos_id(), draft.eos_id(), target.bos_id(), target.eos_id());
    const size_t common = std::min(nt, nd);
    for (size_t id = 0; id < common; ++id) {
        const auto i = static_cast<int32_t>(id);
        if (target.token_text(i) != draft.token_text(i))
            fail("draft model %s: token %zu is '%s' there but '%s' in the model (a drafter needs the same vocabulary)",
                 draft_name.c_str(), id, draft.token_text(i).c_str(), target.token_text(i).c_str());
    }
}

ModelDrafter::ModelDrafter(const std::string& path, const Tokenizer& target, size_t n_ctx, int n_threads) {
    file_ = GgufFile::open(path);
    check_draft_vocabulary(target, *Tokenizer::from_gguf(*file_), path);
    ModelOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = n_threads;
    model_ = Model::load(*file_, o);
}

ModelDrafter::~ModelDrafter() = default;

void ModelDrafter::draft(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) {
    out->clear();
    if (history.empty() || max == 0) return;
    // The draft model sees text only: a conversation with image rows gets no draft.
    if (std::any_of(history.begin(), history.end(), [](int32_t id) { return id < 0; })) return;
    size_t common = 0;
    const size_t limit = std::min(cached_.size(), history.size());
    while (common < limit && cached_[common] == history[common]) ++common;
    if (common == history.size()) --common;  // the last token is recomputed for its logits
    const size_t kept = model_->truncate(common);
    cached_.resize(kept);
    const size_t todo = history.size() - kept;
    if (model_->context_room() != SIZE_MAX && model_->context_room() < todo + max) return;  // no room: no draft
    model_->forward(history.data() + kept, todo, &logits_);
    cached_.insert(cached_.end(), history.begin() + std::ptrdiff_t(kept), history.end());
    for (;;) {
        const auto best = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
        out->push_back(best);
        if (out->size() == max) return;
        model_->forward(&best, 1, &logits_);
        cached_.push_back(best);
    }
}

// ---- the adaptive choice ----

namespace {

void check_lengths(const SpecOptions& o) {
    if (o.draft_max == 0 || o.draft_min == 0 || o.draft_min > o.draft_max)
        fail("speculative decoding: draft_min %zu and draft_max %zu must be 1 <= min <= max", o.draft_min, o.draft_max);
}

}  // namespace

SpecDecoder::SpecDecoder(const SpecOptions& options, const Tokenizer& target, size_t n_ctx, int n_threads)
    : options_(options) {
    check_lengths(options_);
    if (options_.type == SpecType::off) return;
    // Prompt lookup first: free, while the draft model's first draft costs a prefill of the whole
    // conversation on it. Until measured, the draft model runs only where lookup has no guess.
    Arm lookup;
    lookup.drafter = std::make_unique<NgramDrafter>(options_.ngram_min, options_.ngram_max);
    arms_.push_back(std::move(lookup));
    if (options_.type == SpecType::draft) {
        if (options_.draft_model.empty()) fail("spec_type draft needs a draft_model");
        Arm arm;
        const int threads = options_.draft_threads > 0 ? options_.draft_threads : n_threads;
        arm.drafter = std::make_unique<ModelDrafter>(options_.draft_model, target, n_ctx, threads);
        arms_.push_back(std::move(arm));
    }
}

SpecDecoder::SpecDecoder(const SpecOptions& options, std::vector<std::unique_ptr<Drafter>> drafters)
    : options_(options) {
    check_lengths(options_);
    for (auto& d : drafters) {
        Arm arm;
        arm.drafter = std::move(d);
        arms_.push_back(std::move(arm));
    }
}

SpecDecoder::~SpecDecoder() = default;

const char* SpecDecoder::drafter_name(int drafter) const {
    if (drafter < 0 || static_cast<size_t>(drafter) >= arms_.size()) return "none";
    return arms_[static_cast<size_t>(drafter)].drafter->name();
}

int SpecDecoder::propose(const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) {
    out->clear();
    ++steps_;
    for (Arm& arm : arms_) score_shadow(arm, history);
    // The arms in order of their measured speed (unmeasured first: each is tried once).
    std::vector<size_t> order;
    for (size_t i = 0; i < arms_.size(); ++i)
        if (arms_[i].off_until <= steps_) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const double ra = arms_[a].tokens_per_s, rb = arms_[b].tokens_per_s;
        if ((ra == 0.0) != (rb == 0.0)) return ra == 0.0;
        return ra > rb;
    });
    const bool first_step = options_.adaptive && plain_s_ == 0.0;  // plain: the cost drafts are weighed against
    for (size_t i : order) {
        Arm& arm = arms_[i];
        const size_t length = options_.adaptive ? best_length(arm, max) : max;
        const bool shadow_only =
            options_.adaptive && arm.drafter->costs_nothing() && (first_step || !verifying_pays(arm, length));
        if (shadow_only || first_step) {
            if (shadow_only && arm.shadow.empty()) {  // scored as the reply goes on (score_shadow)
                std::vector<int32_t> tokens;
                arm.drafter->draft(history, length, &tokens);
                arm.shadow.start(std::move(tokens), history.size());
            }
            continue;
        }
        if (!arm.shadow.empty()) {  // verified from here on: what the shadow matched so far counts
            note_run(arm, arm.shadow.matched(), false);
            arm.shadow.clear();
        }
        const Clock::time_point start = Clock::now();
        arm.drafter->draft(history, length, out);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (!out->empty()) arm.draft_s_per_token = blend(arm.draft_s_per_token, seconds / out->size());
        if (out->size() >= options_.draft_min) {
            draft_seconds_ = seconds;
            return static_cast<int>(i);
        }
        out->clear();
    }
    return -1;
}

// Whether verifying `length` drafts of `arm` is expected to beat a plain step: its expected tokens
// per second (best_length's rate) against plain decoding's, by kPayMargin.
bool SpecDecoder::verifying_pays(const Arm& arm, size_t length) const {
    if (plain_s_ == 0.0 || length == 0) return false;
    const double a = arm.kept / (arm.kept + arm.missed);
    const double expected =
        a >= 1.0 ? static_cast<double>(length + 1) : (1.0 - std::pow(a, static_cast<double>(length + 1))) / (1.0 - a);
    const double seconds = step_seconds(length + 1) + static_cast<double>(length) * arm.draft_s_per_token;
    return expected / seconds > kPayMargin / plain_s_;
}

// Scores the arm's shadow draft against what the reply produced since it was made.
void SpecDecoder::score_shadow(Arm& arm, const std::vector<int32_t>& history) {
    ShadowDraft::Run run;
    if (arm.shadow.score(history, &run)) note_run(arm, run.kept, run.missed);
}

// A run of `kept` drafts, ended by a miss or not, in the arm's decaying acceptance counts.
void SpecDecoder::note_run(Arm& arm, size_t kept, bool missed) {
    arm.kept = kAcceptanceDecay * arm.kept + static_cast<double>(kept);
    arm.missed = kAcceptanceDecay * arm.missed + (missed ? 1.0 : 0.0);
}

// The draft length with the most tokens per second by the measured costs: a step verifying k
// drafts costs step_seconds(k + 1) + k times the drafter's seconds per token and yields
// (1 - a^(k+1)) / (1 - a) tokens when each draft is kept with probability a (a run of kept drafts
// ends at the first miss). At least draft_min: whether drafting pays at all is judged on what the steps
// delivered (record()), not on this estimate, which one unlucky draft can sink.
size_t SpecDecoder::best_length(const Arm& arm, size_t max) const {
    const size_t least = options_.draft_min;                                // shorter drafts are not verified
    if (plain_s_ == 0.0) return std::min(max, std::max<size_t>(least, 4));  // no costs measured yet
    if (arm.probe) return std::min(max, std::max(least, kProbeLength));
    const double a = arm.kept / (arm.kept + arm.missed);
    double best_rate = 0.0;
    size_t best = least;
    double a_pow = a;  // a^(k+1) below, starting at k = 0
    for (size_t k = 1; k <= max; ++k) {
        a_pow *= a;
        if (k < least) continue;
        const double expected = a >= 1.0 ? static_cast<double>(k + 1) : (1.0 - a_pow) / (1.0 - a);
        const double rate = expected / (step_seconds(k + 1) + static_cast<double>(k) * arm.draft_s_per_token);
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

// A step of n tokens: as measured (moving average), else a plain step plus n - 1 times the
// measured (or assumed) cost of one more token. Steps of some sizes cost more than their
// neighbours (a kernel path changes with the token count), which only measurements show.
double SpecDecoder::step_seconds(size_t n) const {
    if (n < step_s_.size() && step_s_[n] > 0.0) return step_s_[n];
    const double extra = extra_s_ > 0.0 ? extra_s_ : kExtraPrior * plain_s_;
    return plain_s_ + static_cast<double>(n - 1) * extra;
}

void SpecDecoder::switch_off(Arm& arm) {
    arm.off_span = arm.off_span == 0 ? kFirstOffSpan : std::min(kMaxOffSpan, arm.off_span * 2);
    arm.off_until = steps_ + arm.off_span;
    arm.samples = kJudgeAfter - 1;  // the probe when it comes back is judged at once
    arm.tokens_per_s = 0.0;         // measured afresh when it comes back
    arm.kept = arm.missed = 1.0;
    arm.probe = true;  // its first step back drafts a little whatever the estimate says
}

void SpecDecoder::record(int drafter, size_t drafted, size_t accepted, double seconds) {
    if (seconds <= 0.0) return;
    if (drafter < 0) {
        plain_s_ = settle(plain_s_, seconds, 0.0);
        return;
    }
    Arm& arm = arms_[static_cast<size_t>(drafter)];
    if (!options_.adaptive) return;
    const double verify_s = std::max(0.0, seconds - draft_seconds_);
    const double guess = step_seconds(drafted + 1);  // before this sample
    if (plain_s_ > 0.0 && drafted > 0)
        extra_s_ =
            settle(extra_s_, std::max(0.0, verify_s - plain_s_) / static_cast<double>(drafted), kExtraPrior * plain_s_);
    if (drafted + 1 >= step_s_.size()) step_s_.resize(drafted + 2, 0.0);
    step_s_[drafted + 1] = settle(step_s_[drafted + 1], verify_s, guess);
    arm.probe = false;
    note_run(arm, accepted, accepted < drafted);
    arm.tokens_per_s = blend(arm.tokens_per_s, static_cast<double>(accepted + 1) / seconds);
    ++arm.samples;
    // A free drafter is gated step by step (verifying_pays), never switched off.
    if (arm.samples < kJudgeAfter || plain_s_ == 0.0 || arm.drafter->costs_nothing()) return;
    if (arm.tokens_per_s * plain_s_ < kKeepMargin) {
        switch_off(arm);
    } else {
        arm.off_span = 0;
    }
}

// ---- the reply's tokens ----

TokenSource::TokenSource(SpecTarget& target, SpecDecoder* spec, Sampler& sampler, std::vector<int32_t> history,
                         std::vector<float> logits)
    : target_(target),
      spec_(spec != nullptr && spec->drafting() ? spec : nullptr),
      sampler_(sampler),
      history_(std::move(history)),
      logits_(std::move(logits)),
      n_vocab_(logits_.size()) {}

int32_t TokenSource::next() {
    in_cache_ = false;
    if (drafter_ < 0 && have_top_) {
        have_top_ = false;
        int32_t token = -1;
        if (sampler_.sample_from_top(top_, &token)) return token;
        target_.last_logits(&logits_);
        return sampler_.sample(logits_);
    }
    if (drafter_ < 0) return sampler_.sample(logits_);
    const float* row = rows_.data() + judged_ * n_vocab_;
    logits_.assign(row, row + n_vocab_);
    if (judged_ == drafts_.size()) {  // every draft kept: the last row gives one more token
        end_verification(judged_);
        return sampler_.sample(logits_);
    }
    TokenDistribution p;
    sampler_.distribution(logits_, &p);
    const DraftVerdict verdict = judge_draft(p, drafts_[judged_], sampler_);
    sampler_.note_chosen(verdict.token);
    if (verdict.accepted) {
        ++judged_;
        in_cache_ = true;
        return verdict.token;
    }
    // Rows from the rejected draft on are dropped; the replacement is appended by advance().
    target_.keep(base_ + 1 + judged_);
    end_verification(judged_);
    return verdict.token;
}

void TokenSource::end_verification(size_t accepted) {
    counters_.drafted += drafts_.size();
    counters_.accepted += accepted;
    if (spec_ != nullptr) spec_->record(drafter_, drafts_.size(), accepted, step_seconds_);
    drafter_ = -1;
}

void TokenSource::advance(int32_t token) {
    if (spec_ != nullptr) history_.push_back(token);
    if (in_cache_) return;
    const Clock::time_point start = Clock::now();
    ++counters_.steps;
    int drafter = -1;
    if (spec_ != nullptr) {
        const size_t fits = target_.reserve(spec_->options().draft_max + 1);  // the token and its drafts
        const size_t max = std::min(
            {spec_->options().draft_max, fits - 1, target_.max_step() > 1 ? target_.max_step() - 1 : size_t(0)});
        if (max > 0) drafter = spec_->propose(history_, max, &drafts_);
    }
    if (drafter < 0 && top_k_ > 0 && target_.append_top(token, top_k_, banned_, &top_)) {
        have_top_ = true;
        return;
    }
    if (drafter < 0) {
        target_.append_scored(&token, 1, &logits_);
        if (spec_ != nullptr) spec_->record(-1, 0, 0, std::chrono::duration<double>(Clock::now() - start).count());
        return;
    }
    base_ = target_.n_cached();
    std::vector<int32_t> ids;
    ids.reserve(1 + drafts_.size());
    ids.push_back(token);
    ids.insert(ids.end(), drafts_.begin(), drafts_.end());
    target_.append_scored(ids.data(), ids.size(), &rows_);
    drafter_ = drafter;
    judged_ = 0;
    step_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
}

void TokenSource::finish(size_t prompt_tokens, size_t emitted) {
    if (drafter_ >= 0) end_verification(judged_);
    // Plain decoding leaves the reply's last token out of the cache (it was never appended).
    const size_t keep = prompt_tokens + (emitted > 0 ? emitted - 1 : 0);
    if (target_.n_cached() > keep + 1) target_.keep(keep + 1);
}

}  // namespace cactus
