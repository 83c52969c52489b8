// Speculative decoding in the engine's session: the session's cache as the target drafts are
// verified against, and the options that make the drafters.
#include "core/error.h"
#include "engine/engine.h"
#include "engine/speculative.h"
#include "models/model.h"

namespace cactus {

void Engine::set_speculative(const SpecOptions& spec) {
    const bool same_drafters = spec_decoder_ && spec.type == spec_.type && spec.draft_model == spec_.draft_model;
    if (spec.type == SpecType::off) {
        spec_decoder_.reset();
    } else if (!same_drafters || spec.draft_max != spec_.draft_max || spec.draft_min != spec_.draft_min ||
               spec.ngram_min != spec_.ngram_min || spec.ngram_max != spec_.ngram_max ||
               spec.adaptive != spec_.adaptive || spec.draft_threads != spec_.draft_threads) {
        // Built whole before it replaces the current one: an error leaves the previous settings.
        spec_decoder_ =
            std::make_unique<SpecDecoder>(spec, *tokenizer_, model_->info().n_ctx, model_options_.n_threads);
    }
    spec_ = spec;
}

void Engine::keep_cached(size_t n) {
    CACTUS_ASSERT(n <= cached_ids_.size());
    const size_t kept = model_->truncate(n);
    if (kept < n) {  // only an earlier state could be restored: recompute the rest
        const std::vector<int32_t> again(cached_ids_.begin() + std::ptrdiff_t(kept),
                                         cached_ids_.begin() + std::ptrdiff_t(n));
        cached_ids_.resize(kept);
        cached_keys_.resize(kept);
        std::vector<float> unused;
        forward_cached(again.data(), again.size(), &unused);
        return;
    }
    cached_ids_.resize(n);
    cached_keys_.resize(n);
}

// The session's cache as the target of verification steps.
class Engine::SessionTarget final : public SpecTarget {
public:
    explicit SessionTarget(Engine& engine) : engine_(engine) {}
    void append_scored(const int32_t* ids, size_t n, std::vector<float>* logits) override {
        if (n == 1) {
            engine_.forward_cached(ids, 1, logits);
            return;
        }
        std::vector<float> last;
        engine_.model_->forward(ids, n, &last, logits);
        engine_.cached_ids_.insert(engine_.cached_ids_.end(), ids, ids + n);
        engine_.cached_keys_.insert(engine_.cached_keys_.end(), n, 0);
    }
    void keep(size_t n) override { engine_.keep_cached(n); }
    size_t n_cached() const override { return engine_.cached_ids_.size(); }
    size_t reserve(size_t wanted) override { return engine_.model_->reserve(wanted); }
    size_t max_step() const override { return engine_.model_->n_batch(); }
    bool append_top(int32_t id, size_t k, const std::vector<int32_t>* banned, TopCandidates* out) override {
        if (!engine_.model_->device_sampling()) return false;
        engine_.model_->forward_top(id, k, out, banned);
        engine_.cached_ids_.push_back(id);
        engine_.cached_keys_.push_back(0);
        return true;
    }
    void last_logits(std::vector<float>* logits) override { engine_.model_->last_logits(logits); }

private:
    Engine& engine_;
};

std::unique_ptr<SpecTarget> Engine::session_target() { return std::make_unique<SessionTarget>(*this); }

}  // namespace cactus
