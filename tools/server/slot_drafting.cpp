#include "slot_drafting.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/error.h"
#include "core/log.h"

namespace cactus::server {

namespace {

// A draft model's token whose probability is below this is more likely rejected than kept: the
// draft stops before it (the target's step costs about the same for a few tokens less).
constexpr double kDraftConfidence = 0.5;

// The most likely id of logits[0..n) and its softmax probability.
std::pair<int32_t, double> most_likely(const float* logits, size_t n) {
    const size_t best = static_cast<size_t>(std::max_element(logits, logits + n) - logits);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - logits[best]));
    return {static_cast<int32_t>(best), 1.0 / sum};
}

}  // namespace

SlotDrafter::SlotDrafter(const SpecOptions& options, std::unique_ptr<StepBackend> draft_model)
    : options_(options), model_(std::move(draft_model)) {
    ngram(0);  // checks the n-gram sizes at the start, with a clear error
}

NgramDrafter& SlotDrafter::ngram(int seq) {
    const size_t i = static_cast<size_t>(seq);
    if (seq < 0) fail("SlotDrafter: slot %d", seq);
    if (i >= ngrams_.size()) ngrams_.resize(i + 1);
    if (!ngrams_[i]) ngrams_[i] = std::make_unique<NgramDrafter>(options_.ngram_min, options_.ngram_max);
    return *ngrams_[i];
}

void SlotDrafter::restart(int seq) {
    if (seq >= 0 && static_cast<size_t>(seq) < ngrams_.size()) ngrams_[static_cast<size_t>(seq)].reset();
}

void SlotDrafter::lookup(int seq, const std::vector<int32_t>& history, size_t max, std::vector<int32_t>* out) {
    ngram(seq).draft(history, max, out);
    if (out->size() > max) out->resize(max);
}

void SlotDrafter::draft(std::vector<DraftRequest>& requests) {
    std::vector<DraftRequest*> without;
    for (DraftRequest& r : requests) {
        r.tokens.clear();
        r.source = DraftSource::none;
        if (r.max_ngram > 0) {
            lookup(r.seq, r.history, r.max_ngram, &r.tokens);
            if (!r.tokens.empty() && r.tokens.size() >= options_.draft_min) {
                r.source = DraftSource::ngram;
                continue;
            }
            r.tokens.clear();
        }
        if (r.max_model > 0) without.push_back(&r);
    }
    if (model_ && !without.empty()) draft_with_model(without);
}

std::vector<DraftRequest*> SlotDrafter::catch_up(const std::vector<DraftRequest*>& requests) {
    std::vector<DraftRequest*> ready;
    std::vector<size_t> done;  // per ready request: history tokens in the draft model's cache
    for (DraftRequest* r : requests) {
        try {
            done.push_back(model_->begin(r->seq, r->history));
            ready.push_back(r);
        } catch (const std::exception& e) {  // a history the draft model cannot hold: no draft
            CACTUS_LOG_WARN("server: the draft model skips slot %d: %s", r->seq, e.what());
        }
    }
    last_logits_.assign(ready.size(), {});
    std::vector<bool> finished(ready.size(), false);
    for (;;) {  // rounds of at most one step's tokens until every history is in
        std::vector<SeqStep> batch;
        std::vector<size_t> which;
        size_t budget = model_->max_step_tokens();
        for (size_t i = 0; i < ready.size() && budget > 0; ++i) {
            if (finished[i]) continue;
            const std::vector<int32_t>& h = ready[i]->history;
            const size_t n = std::min(h.size() - done[i], budget);
            SeqStep item;
            item.seq = ready[i]->seq;
            item.tokens.assign(h.begin() + std::ptrdiff_t(done[i]), h.begin() + std::ptrdiff_t(done[i] + n));
            item.want_logits = done[i] + n == h.size();
            budget -= n;
            batch.push_back(std::move(item));
            which.push_back(i);
        }
        if (batch.empty()) break;
        model_->step(batch);
        for (size_t b = 0; b < batch.size(); ++b) {
            const size_t i = which[b];
            done[i] += batch[b].tokens.size();
            if (batch[b].want_logits) {
                last_logits_[i] = std::move(batch[b].logits);
                finished[i] = true;
            }
        }
    }
    return ready;
}

void SlotDrafter::draft_with_model(const std::vector<DraftRequest*>& requests) {
    std::vector<DraftRequest*> ready = catch_up(requests);
    std::vector<DraftRequest*> active;
    std::vector<int32_t> next;  // per active request: its drafted token not yet in the draft model
    for (size_t i = 0; i < ready.size(); ++i) {
        DraftRequest* r = ready[i];
        const size_t room = model_->context_room(r->seq);
        r->max_model = std::min(r->max_model, room == SIZE_MAX ? r->max_model : (room > 1 ? room - 1 : 0));
        if (r->max_model == 0 || last_logits_[i].empty()) continue;
        const auto [id, p] = most_likely(last_logits_[i].data(), last_logits_[i].size());
        if (p < kDraftConfidence) continue;
        r->tokens.push_back(id);
        if (r->tokens.size() < r->max_model) {
            active.push_back(r);
            next.push_back(id);
        }
    }
    while (!active.empty()) {  // one token per active slot per step, greedily
        std::vector<SeqStep> batch(active.size());
        for (size_t i = 0; i < active.size(); ++i) {
            batch[i].seq = active[i]->seq;
            batch[i].tokens = {next[i]};
            batch[i].want_logits = true;
        }
        model_->step(batch);
        std::vector<DraftRequest*> still;
        std::vector<int32_t> still_next;
        for (size_t i = 0; i < active.size(); ++i) {
            if (!batch[i].want_logits || batch[i].logits.empty()) continue;
            const auto [id, p] = most_likely(batch[i].logits.data(), batch[i].logits.size());
            if (p < kDraftConfidence) continue;
            active[i]->tokens.push_back(id);
            if (active[i]->tokens.size() < active[i]->max_model) {
                still.push_back(active[i]);
                still_next.push_back(id);
            }
        }
        active.swap(still);
        next.swap(still_next);
    }
    for (DraftRequest* r : requests) {
        if (r->tokens.empty() || r->tokens.size() < options_.draft_min)
            r->tokens.clear();
        else
            r->source = DraftSource::model;
    }
}

std::unique_ptr<StepBackend> load_draft_model(const SpecOptions& options, const StepBackend& target, int n_threads) {
    EngineOptions o;
    o.n_threads = options.draft_threads > 0 ? options.draft_threads : n_threads;
    o.n_ctx = target.n_ctx();
    o.device = target.engine().encoder_options(o.n_threads).device;  // the served model's device
    std::unique_ptr<StepBackend> draft = make_batched(options.draft_model, o, target.n_seqs());
    check_draft_vocabulary(target.engine().tokenizer(), draft->engine().tokenizer(), options.draft_model);
    return draft;
}

const char* llama_spec_types(SpecType type) {
    switch (type) {
        case SpecType::off:
            return "none";
        case SpecType::ngram:
            return "ngram-simple";
        case SpecType::draft:
            return "draft-simple,ngram-simple";
    }
    return "none";
}

}  // namespace cactus::server
