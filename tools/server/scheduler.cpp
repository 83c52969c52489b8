#include "scheduler.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "engine/text_stream.h"
#include "metrics.h"
#include "sampling/draft_acceptance.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

double ms_since(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Log-softmax of the chosen token and the `k` most likely ids, from raw logits ([n_vocab]).
TokenInfo logprob_info(const std::vector<float>& logits, int32_t chosen, int k) {
    TokenInfo info;
    float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
    const float lse = max_logit + static_cast<float>(std::log(sum));
    info.logprob = logits[static_cast<size_t>(chosen)] - lse;
    if (k <= 0) return info;
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const size_t n = std::min(static_cast<size_t>(k), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    for (size_t i = 0; i < n; ++i) info.top.emplace_back(ids[i], logits[static_cast<size_t>(ids[i])] - lse);
    return info;
}

}  // namespace

// A slot's generation state; only the scheduler thread touches it.
struct SlotState {
    int id = 0;
    std::shared_ptr<Job> job;
    size_t prefilled = 0;   // prompt tokens in the cache
    bool decoding = false;  // the prompt is in; next_token waits to be appended
    int32_t next_token = -1;
    std::unique_ptr<GrammarConstraint> constraint;  // the request's grammar (constraint.h), if any
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<StreamingDetokenizer> detok;
    std::unique_ptr<TextStream> stream;
    GenStats stats;
    Clock::time_point first_token_time;
    bool have_first = false;
    // Speculation: whether this request drafts (no grammar, no images), how far, and the draft
    // in the step being run with the cache length before it.
    bool may_draft = false;
    DraftPace paces[2];  // per DraftSource: prompt lookup, the draft model
    std::vector<int32_t> draft;
    DraftSource draft_source = DraftSource::none;
    size_t verify_from = 0;
};

namespace {

// The pace of the drafter that made the slot's draft in this step.
DraftPace* pace_of(SlotState& slot) {
    return slot.draft_source == DraftSource::none ? nullptr : &slot.paces[static_cast<int>(slot.draft_source)];
}

}  // namespace

Scheduler::Scheduler(StepBackend& backend, const SchedulerOptions& options, Metrics& metrics,
                     std::unique_ptr<SlotDrafter> drafter)
    : backend_(backend), options_(options), metrics_(metrics), drafter_(std::move(drafter)) {
    if (options_.step_tokens == 0 || options_.prefill_chunk == 0)
        fail("Scheduler: step_tokens and prefill_chunk must be positive");
    options_.step_tokens = std::min(options_.step_tokens, backend_.max_step_tokens());
    options_.prefill_chunk = std::min(options_.prefill_chunk, options_.step_tokens);
    for (size_t i = 0; i < backend_.n_seqs(); ++i) {
        slots_.push_back(std::make_unique<SlotState>());
        slots_.back()->id = static_cast<int>(i);
        SlotView view;
        view.id = static_cast<int>(i);
        views_.push_back(view);
    }
    slot_last_used_.assign(slots_.size(), 0);
    running_jobs_.resize(slots_.size());
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_) return;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
}

void Scheduler::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!running_) return;
        running_ = false;
    }
    cancel_all();
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Job> Scheduler::submit(GenParams params) {
    std::shared_ptr<Job> job;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job = std::make_shared<Job>(std::move(params), ++job_counter_);
        // Free slots take jobs at the next step; beyond them, max_queue may wait.
        const size_t free_slots = slots_.size() - std::min(busy_, slots_.size());
        if (queue_.size() >= options_.max_queue + free_slots) return nullptr;
        queue_.push_back(job);
    }
    wake_.notify_all();
    return job;
}

void Scheduler::cancel_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& job : queue_) job->cancel();
    for (auto& job : running_jobs_) {
        if (job) job->cancel();
    }
}

std::shared_ptr<EraseRequest> Scheduler::erase(int slot) {
    if (slot < 0 || static_cast<size_t>(slot) >= slots_.size())
        fail("Scheduler::erase: slot %d outside [0, %zu)", slot, slots_.size());
    auto request = std::make_shared<EraseRequest>();
    request->slot = slot;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!running_) {  // stopped: no thread would take it, and no request runs to wait for
            request->done = true;
            return request;
        }
        erases_.push_back(request);
    }
    wake_.notify_all();
    return request;
}

void Scheduler::erase_idle_slots() {
    std::vector<std::shared_ptr<EraseRequest>> ready;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = erases_.begin(); it != erases_.end();) {
            if (slots_[static_cast<size_t>((*it)->slot)]->job) {
                ++it;  // busy: erased when its request ends, as llama-server defers it
            } else {
                ready.push_back(*it);
                it = erases_.erase(it);
            }
        }
    }
    for (auto& request : ready) {
        const size_t n = backend_.erase(request->slot);
        {
            std::lock_guard<std::mutex> lock(request->mutex);
            request->n_erased = n;
            request->done = true;
        }
        request->done_cv.notify_all();
    }
}

size_t Scheduler::queued() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
}

size_t Scheduler::busy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return busy_;
}

std::vector<SlotView> Scheduler::slots() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return views_;
}

void Scheduler::loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!running_ && busy_ == 0) break;
            if (busy_ == 0 && queue_.empty() && erases_.empty()) {
                wake_.wait_for(lock, std::chrono::milliseconds(200));
                continue;
            }
        }
        retire_cancelled();
        erase_idle_slots();
        admit();
        bool any_busy = false;
        for (auto& s : slots_) any_busy = any_busy || s->job != nullptr;
        if (any_busy) {
            run_step();
        } else {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait_for(lock, std::chrono::milliseconds(20));
        }
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& s : slots_) publish_view(*s);
        metrics_.set_load(queue_.size(), busy_);
    }
    erase_idle_slots();  // erases that waited for the last requests: every slot is idle now
}

namespace {

// A chunk [from, from + n) moved so that it cuts no bidirectional span (Gemma 3's image): it ends
// before a span it would cut, or, when it starts at one, holds the whole span.
size_t whole_spans(const MediaPrompt& media, size_t from, size_t n) {
    const size_t end = from + n;
    if (n == 0 || end >= media.tokens.size() || media.group[end] < 0 || media.group[end - 1] != media.group[end])
        return n;
    const std::pair<size_t, size_t> span = media.span_of(end);
    return span.first > from ? span.first - from : span.second - from;
}

}  // namespace

int Scheduler::pick_slot(const GenParams& params) const {
    if (params.id_slot >= 0) {  // pinned: that slot or none (the job waits for it)
        const size_t i = static_cast<size_t>(params.id_slot);
        return i < slots_.size() && !slots_[i]->job ? params.id_slot : -1;
    }
    const std::vector<int32_t>& prompt = params.prompt;
    int best = -1;
    size_t best_common = 0;
    for (const auto& s : slots_) {
        if (s->job) continue;
        const std::vector<int32_t>& cached = backend_.cached_tokens(s->id);
        size_t common = 0;
        const size_t limit = std::min(cached.size(), prompt.size());
        // Rows match by their id (digest-derived: media.h); kAnonymousRow (a bidirectional span) never does.
        while (common < limit && cached[common] == prompt[common] && prompt[common] != kAnonymousRow) ++common;
        // The longest shared prefix wins; among equals, the slot unused for longest, so the caches
        // of recent conversations stay for their next turn.
        const bool better = best < 0 || common > best_common ||
                            (common == best_common &&
                             slot_last_used_[static_cast<size_t>(s->id)] < slot_last_used_[static_cast<size_t>(best)]);
        if (better) {
            best = s->id;
            best_common = common;
        }
    }
    return best;
}

void Scheduler::admit() {
    for (;;) {
        std::shared_ptr<Job> job;
        int slot_id = -1;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            // Drop queued jobs that were cancelled or outlived their deadline.
            const Clock::time_point now = Clock::now();
            for (auto it = queue_.begin(); it != queue_.end();) {
                if ((*it)->cancelled() || now >= (*it)->params().deadline) {
                    GenEvent e;
                    e.kind = GenEvent::Kind::Error;
                    e.status = (*it)->cancelled() ? 499 : 503;
                    e.error = (*it)->cancelled() ? "the request was cancelled while queued"
                                                 : "the request timed out waiting for a free slot";
                    (*it)->push(std::move(e));
                    it = queue_.erase(it);
                } else {
                    ++it;
                }
            }
            // The first queued job that has a slot: a job pinned to a busy slot lets the next pass.
            auto it = queue_.begin();
            for (; it != queue_.end(); ++it) {
                slot_id = pick_slot((*it)->params());
                if (slot_id >= 0) break;
            }
            if (it == queue_.end()) return;
            job = *it;
            queue_.erase(it);
            running_jobs_[static_cast<size_t>(slot_id)] = job;
            ++busy_;
            SlotView& v = views_[static_cast<size_t>(slot_id)];
            v.id_task = job->id();
            v.gen = job->params().gen;
            v.n_probs = job->params().top_logprobs;
        }
        SlotState& slot = *slots_[static_cast<size_t>(slot_id)];
        slot_last_used_[static_cast<size_t>(slot_id)] = ++use_counter_;
        slot.job = job;
        slot.stats = GenStats{};
        slot.stats.slot = slot_id;
        slot.stats.id_task = job->id();
        slot.stats.prompt_tokens = job->params().prompt.size();
        slot.stats.queue_ms = ms_since(job->submitted(), Clock::now());
        slot.decoding = false;
        slot.have_first = false;
        try {
            if (!job->params().cache_prompt) backend_.erase(slot_id);
            slot.prefilled = backend_.begin(slot_id, job->params().prompt);
        } catch (const std::exception& e) {
            fail_slot(slot, 400, e.what());
            continue;
        }
        slot.stats.cached_tokens = slot.prefilled;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            views_[static_cast<size_t>(slot_id)].prompt_cached = slot.prefilled;
        }
        const GenerationOptions& gen = job->params().gen;
        slot.sampler = std::make_unique<Sampler>(gen.sampling);
        for (int32_t id : job->params().prompt)
            if (id >= 0) slot.sampler->accept(id);  // image rows are no tokens
        slot.constraint = gen.constraint ? std::make_unique<GrammarConstraint>(gen.constraint) : nullptr;
        slot.sampler->set_constraint(slot.constraint.get());
        slot.may_draft = drafter_ != nullptr && !slot.constraint && !job->params().media;
        slot.draft.clear();
        if (slot.may_draft) {
            // With a draft model beside it, prompt lookup keeps drafting only while it gets at
            // least half its drafts accepted: the model's drafts are accepted more often.
            const SpecOptions& o = drafter_->options();
            slot.paces[0].reset(o.draft_max, o.draft_min, drafter_->has_model() ? 0.5 : 0.0, true);
            slot.paces[1].reset(o.draft_max, o.draft_min, 0.0, false);
            drafter_->restart(slot.id);
        }
        slot.detok = std::make_unique<StreamingDetokenizer>(backend_.engine().tokenizer());
        slot.stream = std::make_unique<TextStream>(gen.stop_sequences, gen.include_stop_sequences);
        metrics_.observe_queue(slot.stats.queue_ms / 1000.0);
        report_progress(slot);
    }
}

void Scheduler::report_progress(SlotState& slot) {
    if (!slot.job->params().report_progress) return;
    GenEvent e;
    e.kind = GenEvent::Kind::Progress;
    e.prefilled = slot.prefilled;
    e.stats = slot.stats;
    e.stats.total_ms = ms_since(slot.job->submitted(), Clock::now());
    slot.job->push(std::move(e));
}

void Scheduler::retire_cancelled() {
    const Clock::time_point now = Clock::now();
    for (auto& s : slots_) {
        if (!s->job) continue;
        if (s->job->cancelled())
            finish(*s, "cancelled");
        else if (now >= s->job->params().deadline)
            finish(*s, "timeout");
    }
}

std::vector<DraftRequest> Scheduler::draft_requests(size_t budget) {
    std::vector<DraftRequest> out;
    if (!drafter_) return out;
    for (auto& s : slots_) {
        if (!s->job || !s->decoding || !s->may_draft) continue;
        std::vector<int32_t> history = backend_.cached_tokens(s->id);
        history.push_back(s->next_token);
        const bool ngram = s->paces[0].drafting_now(history);
        const bool model = drafter_->has_model() && s->paces[1].drafting_now(history);
        if (s->paces[0].wants_shadow()) {  // prompt lookup is free: scored in the shadow while paused
            std::vector<int32_t> shadow;
            drafter_->lookup(s->id, history, s->paces[0].length(), &shadow);
            s->paces[0].set_shadow(std::move(shadow), history);
        }
        if (!ngram && !model) continue;
        // No more than the reply may still take after the token to append, nor more than its room
        // (the emissions end where plain decoding would end them: one token of room left).
        size_t max = budget;
        const size_t room = backend_.context_room(s->id);
        if (room != SIZE_MAX) max = std::min(max, room > 2 ? room - 2 : 0);
        const size_t limit = s->job->params().gen.max_tokens, made = s->stats.completion_tokens;
        max = std::min(max, limit > made + 1 ? limit - made - 1 : 0);
        if (max == 0 || max < drafter_->options().draft_min) continue;
        DraftRequest r;
        r.seq = s->id;
        r.history = std::move(history);
        r.max_ngram = ngram ? std::min(max, s->paces[0].length()) : 0;
        r.max_model = model ? std::min(max, s->paces[1].length()) : 0;
        budget -= std::max(r.max_ngram, r.max_model);
        out.push_back(std::move(r));
    }
    if (!out.empty()) drafter_->draft(out);
    return out;
}

void Scheduler::run_step() {
    std::vector<SeqStep> batch;
    size_t budget = options_.step_tokens;
    size_t n_decoding = 0;
    for (auto& s : slots_) n_decoding += s->job && s->decoding ? 1 : 0;
    std::vector<DraftRequest> drafts;
    try {
        drafts = draft_requests(budget > n_decoding ? budget - n_decoding : 0);
    } catch (const std::exception& e) {  // the draft model failed: this step decodes plainly
        CACTUS_LOG_WARN("server: drafting failed: %s", e.what());
        drafts.clear();
    }
    const size_t n_vocab = backend_.engine().tokenizer().vocab_size();
    for (auto& s : slots_) {  // decoding slots first: one token each, and their drafts
        if (!s->job || !s->decoding) continue;
        SeqStep item;
        item.seq = s->id;
        item.tokens = {s->next_token};
        item.want_logits = true;
        s->draft.clear();
        for (const DraftRequest& r : drafts) {
            if (r.seq != s->id) continue;
            s->draft_source = r.source;
            for (int32_t id : r.tokens) {  // a draft model's padding ids are no tokens of ours
                if (id < 0 || static_cast<size_t>(id) >= n_vocab) break;
                s->draft.push_back(id);
            }
        }
        if (!s->draft.empty()) {
            s->verify_from = backend_.cached_tokens(s->id).size();
            item.tokens.insert(item.tokens.end(), s->draft.begin(), s->draft.end());
            item.all_logits = true;
        } else {
            ask_candidates(*s, item);
        }
        budget = budget > item.tokens.size() ? budget - item.tokens.size() : 0;
        batch.push_back(std::move(item));
    }
    for (auto& s : slots_) {  // then prefill chunks within what is left of the budget
        if (!s->job || s->decoding || budget == 0) continue;
        const std::vector<int32_t>& prompt = s->job->params().prompt;
        const MediaPrompt* media = s->job->params().media.get();
        size_t n = std::min({prompt.size() - s->prefilled, options_.prefill_chunk, budget});
        if (media != nullptr) n = whole_spans(*media, s->prefilled, n);
        SeqStep item;
        item.seq = s->id;
        item.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(s->prefilled),
                           prompt.begin() + static_cast<std::ptrdiff_t>(s->prefilled + n));
        if (media != nullptr) {
            item.embd = media->embd.data() + s->prefilled * media->n_embd;
            item.group = media->group.data() + s->prefilled;
        }
        item.want_logits = s->prefilled + n == prompt.size();
        if (item.want_logits) ask_candidates(*s, item);
        budget = n < budget ? budget - n : 0;
        batch.push_back(std::move(item));
    }
    if (batch.empty()) return;
    metrics_.observe_step(batch.size());
    try {
        backend_.step(batch);
    } catch (const std::exception& e) {
        CACTUS_LOG_WARN("server: engine step failed: %s", e.what());
        for (SeqStep& item : batch) fail_slot(*slots_[static_cast<size_t>(item.seq)], 500, e.what());
        return;
    }
    for (SeqStep& item : batch) {
        SlotState& s = *slots_[static_cast<size_t>(item.seq)];
        if (!s.job) continue;
        const bool verifying = s.decoding && !s.draft.empty();
        if (!s.decoding) {
            s.prefilled += item.tokens.size();
            report_progress(s);
        }
        if (verifying)
            on_verified(s, item);
        else if (item.want_logits)
            on_logits(s, item);
    }
}

bool Scheduler::still_wanted(SlotState& slot) {
    if (slot.job->cancelled()) {
        finish(slot, "cancelled");
        return false;
    }
    if (Clock::now() >= slot.job->params().deadline) {
        finish(slot, "timeout");
        return false;
    }
    return true;
}

void Scheduler::on_verified(SlotState& slot, SeqStep& item) {
    const std::vector<int32_t> draft = std::move(slot.draft);
    slot.draft.clear();
    const size_t base = slot.verify_from;
    const size_t rows = draft.size() + 1;
    if (!item.want_logits || item.logits.size() % rows != 0) {  // cut short: nothing verified, decode plainly
        if (DraftPace* pace = pace_of(slot)) pace->record(draft.size(), 0);
        try {
            backend_.keep(slot.id, base);
        } catch (const std::exception& e) {
            return fail_slot(slot, 500, e.what());
        }
        return;
    }
    if (!still_wanted(slot)) return;
    const GenParams& p = slot.job->params();
    const Tokenizer& tok = backend_.engine().tokenizer();
    const bool end_allowed = end_of_turn_allowed(p.gen, slot.constraint.get());
    slot.sampler->set_banned(bans_of(slot));
    const size_t n_vocab = item.logits.size() / rows;
    // Row i holds the logits after the appended token and the first i drafted ones: the draft's
    // token i is judged by them, in order, as plain decoding would have sampled there; the first
    // rejection's replacement, or the token after a whole accepted draft, ends the step.
    std::vector<TokenInfo> chosen;
    size_t accepted = 0;
    try {
        TokenDistribution dist;
        std::vector<float> row, raw;
        for (size_t i = 0; i < rows; ++i) {
            row.assign(item.logits.begin() + std::ptrdiff_t(i * n_vocab),
                       item.logits.begin() + std::ptrdiff_t((i + 1) * n_vocab));
            if (p.top_logprobs >= 0) raw = row;
            int32_t token = -1;
            bool kept = false;
            if (i < draft.size()) {
                slot.sampler->distribution(row, &dist);
                const DraftVerdict v = judge_draft(dist, draft[i], *slot.sampler);
                token = v.token;
                kept = v.accepted;
                slot.sampler->note_chosen(token);
            } else {
                token = slot.sampler->sample(row);
            }
            TokenInfo info = p.top_logprobs >= 0 ? logprob_info(raw, token, p.top_logprobs) : TokenInfo{};
            info.id = token;
            info.probability = slot.sampler->last_probability();
            slot.sampler->accept(token);
            chosen.push_back(std::move(info));
            accepted += kept ? 1 : 0;
            if (!kept || (end_allowed && tok.is_end_of_generation(token))) break;
        }
        backend_.keep(slot.id, base + chosen.size());  // the appended token and the accepted drafts stay
    } catch (const std::exception& e) {
        return fail_slot(slot, 500, e.what());
    }
    slot.stats.draft_n += draft.size();
    slot.stats.draft_accepted += accepted;
    metrics_.observe_drafts(draft.size(), accepted);
    if (DraftPace* pace = pace_of(slot)) pace->record(draft.size(), accepted);
    // Each token is emitted with the room plain decoding would have had when choosing it.
    const size_t room = backend_.context_room(slot.id);
    for (size_t j = 0; j < chosen.size(); ++j) {
        const size_t later = chosen.size() - 1 - j;
        if (!emit(slot, chosen[j], room == SIZE_MAX ? room : room + later)) return;
    }
}

const std::vector<int32_t>* Scheduler::bans_of(const SlotState& slot) const {
    const bool end_allowed = end_of_turn_allowed(slot.job->params().gen, slot.constraint.get());
    return end_allowed ? nullptr : &backend_.engine().tokenizer().end_of_generation_ids();
}

void Scheduler::ask_candidates(const SlotState& slot, SeqStep& item) const {
    if (slot.job->params().top_logprobs >= 0) return;    // log-probabilities need the whole row
    item.top_k = slot.sampler->top_candidates_wanted();  // 0 with a grammar, biases or penalties
    item.banned = bans_of(slot);
}

void Scheduler::on_logits(SlotState& slot, SeqStep& item) {
    if (!still_wanted(slot)) return;
    const GenParams& p = slot.job->params();
    std::vector<float> raw;
    int32_t token = -1;
    slot.sampler->set_banned(bans_of(slot));
    try {
        const bool given = !item.top.ids.empty();  // candidates instead of the row
        const bool drawn = given && slot.sampler->sample_from_top(item.top, &token);
        if (given) metrics_.observe_candidates(drawn);
        if (!drawn) {
            if (given) backend_.fetch_logits(item);
            if (p.top_logprobs >= 0) raw = item.logits;
            token = slot.sampler->sample(item.logits);  // throws when a grammar leaves no token
        }
    } catch (const std::exception& e) {
        return fail_slot(slot, 500, e.what());
    }
    TokenInfo info = p.top_logprobs >= 0 ? logprob_info(raw, token, p.top_logprobs) : TokenInfo{};
    info.id = token;
    info.probability = slot.sampler->last_probability();
    slot.sampler->accept(token);
    emit(slot, info, backend_.context_room(slot.id));
}

bool Scheduler::emit(SlotState& slot, const TokenInfo& info, size_t room) {
    const GenParams& p = slot.job->params();
    const Tokenizer& tok = backend_.engine().tokenizer();
    const int32_t token = info.id;
    if (!slot.have_first) {
        slot.have_first = true;
        slot.first_token_time = Clock::now();
        slot.stats.ttft_ms = ms_since(slot.job->submitted(), slot.first_token_time);
        metrics_.observe_ttft(slot.stats.ttft_ms / 1000.0);
    }
    if (end_of_turn_allowed(p.gen, slot.constraint.get()) && tok.is_end_of_generation(token)) {
        finish(slot, "stop");
        return false;
    }
    GenEvent e;
    e.kind = GenEvent::Kind::Token;
    e.token = info;
    e.text = slot.stream->push(backend_.engine().generated_piece(*slot.detok, token));
    ++slot.stats.completion_tokens;
    const bool new_line = e.text.find('\n') != std::string::npos;
    slot.stats.has_new_line = slot.stats.has_new_line || new_line;
    e.stats = slot.stats;
    e.stats.total_ms = ms_since(slot.job->submitted(), Clock::now());
    slot.job->push(std::move(e));
    const char* end = nullptr;
    if (slot.stream->stopped()) {
        slot.stats.stop_word = slot.stream->matched_stop();
        end = "stop";
    } else if (slot.stats.completion_tokens >= p.gen.max_tokens) {
        end = "length";
    } else if (new_line && p.t_max_predict_ms > 0.0 &&
               ms_since(slot.first_token_time, Clock::now()) > p.t_max_predict_ms) {
        end = "length";  // llama-server's t_max_predict_ms: past the limit, the next newline ends the reply
    } else if (room <= 1) {
        end = "length";
    }
    if (end != nullptr) {
        finish(slot, end);
        return false;
    }
    slot.next_token = token;
    slot.decoding = true;
    return true;
}

void Scheduler::finish(SlotState& slot, const std::string& reason) {
    const Clock::time_point now = Clock::now();
    GenEvent e;
    e.kind = GenEvent::Kind::Done;
    e.finish_reason = reason;
    if (slot.stream && !slot.stream->stopped() && reason != "cancelled") {
        e.text = slot.stream->push(slot.detok->flush());
        e.text += slot.stream->finish();
    }
    if (slot.stream && slot.stream->stopped()) slot.stats.stop_word = slot.stream->matched_stop();
    slot.stats.total_ms = ms_since(slot.job->submitted(), now);
    if (!slot.have_first) slot.stats.ttft_ms = slot.stats.total_ms;
    const double decode_s = (slot.stats.total_ms - slot.stats.ttft_ms) / 1000.0;
    slot.stats.decode_tps =
        slot.stats.completion_tokens > 1 && decode_s > 0.0 ? (slot.stats.completion_tokens - 1) / decode_s : 0.0;
    slot.stats.tokens_in_cache = backend_.cached_tokens(slot.id).size();
    e.stats = slot.stats;
    metrics_.observe_timings(slot.stats.prompt_tokens - slot.stats.cached_tokens,
                             (slot.stats.ttft_ms - slot.stats.queue_ms) / 1000.0, slot.stats.completion_tokens,
                             (slot.stats.total_ms - slot.stats.ttft_ms) / 1000.0,
                             slot.stats.prompt_tokens + slot.stats.completion_tokens);
    metrics_.observe_done(slot.stats.prompt_tokens, slot.stats.cached_tokens, slot.stats.completion_tokens,
                          slot.stats.total_ms / 1000.0, reason);
    // The slot is released (and shown idle on /slots) before the client hears of the end.
    std::shared_ptr<Job> job = slot.job;
    release(slot);
    job->push(std::move(e));
}

void Scheduler::fail_slot(SlotState& slot, int status, const std::string& message) {
    if (!slot.job) return;
    GenEvent e;
    e.kind = GenEvent::Kind::Error;
    e.status = status;
    e.error = message;
    // The slot is released (and shown idle on /slots) before the client hears of the end.
    std::shared_ptr<Job> job = slot.job;
    release(slot);
    job->push(std::move(e));
}

void Scheduler::release(SlotState& slot) {
    slot.job.reset();
    slot.decoding = false;
    std::lock_guard<std::mutex> lock(mutex_);
    running_jobs_[static_cast<size_t>(slot.id)].reset();
    --busy_;
    publish_view(slot);
}

void Scheduler::publish_view(const SlotState& s) {
    SlotView& v = views_[static_cast<size_t>(s.id)];
    v.busy = s.job != nullptr;
    v.cached_tokens = backend_.cached_tokens(s.id).size();
    if (s.job) v.prompt_tokens = s.job->params().prompt.size();  // the last request's stays
    v.generated = s.stats.completion_tokens;
    v.has_new_line = s.stats.has_new_line;
}

}  // namespace cactus::server
