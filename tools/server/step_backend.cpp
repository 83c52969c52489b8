#include "step_backend.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "models/model.h"

namespace cactus::server {

namespace {

class EnginePerSlot final : public StepBackend {
public:
    EnginePerSlot(const std::string& path, const EngineOptions& options, size_t n) {
        if (n == 0) fail("make_engine_per_slot: the slot count is 0");
        for (size_t i = 0; i < n; ++i) engines_.push_back(Engine::load(path, options));
    }

    size_t n_seqs() const override { return engines_.size(); }
    const Engine& engine() const override { return *engines_[0]; }
    GrammarVocab& grammar_vocab() override { return engines_[0]->grammar_vocab(); }
    const std::vector<int32_t>& cached_tokens(int seq) const override { return at(seq).cached_tokens(); }
    size_t begin(int seq, const std::vector<int32_t>& prompt) override {
        for (int32_t id : prompt)
            if (id < 0) fail("begin: prompts with images need the batched backend (serve without --engine-per-slot)");
        return at(seq).keep_prefix(prompt);
    }
    size_t erase(int seq) override {
        const size_t n = at(seq).cached_tokens().size();
        at(seq).reset();
        return n;
    }

    // Speculation needs every row's logits: serve_command.cpp refuses it with --engine-per-slot.
    void keep(int seq, size_t n) override {
        if (n < at(seq).cached_tokens().size()) fail("keep: the engine-per-slot backend drops no drafts");
    }

    void step(std::vector<SeqStep>& batch) override {
        for (SeqStep& s : batch) {
            if (s.all_logits) fail("step: the engine-per-slot backend gives no logits per token (no speculation)");
            s.logits.clear();
            at(s.seq).append(s.tokens.data(), s.tokens.size(), &s.logits);
            if (!s.want_logits) s.logits.clear();
        }
    }
    void fetch_logits(SeqStep&) override { fail("fetch_logits: the engine-per-slot backend gives no candidates"); }

    size_t context_room(int seq) const override { return at(seq).context_room(); }
    size_t n_ctx() const override { return engines_[0]->model().info().n_ctx; }
    size_t max_step_tokens() const override { return SIZE_MAX; }  // Engine::append splits prompts

private:
    Engine& at(int seq) const {
        if (seq < 0 || static_cast<size_t>(seq) >= engines_.size())
            fail("EnginePerSlot: sequence %d outside [0, %zu)", seq, engines_.size());
        return *engines_[static_cast<size_t>(seq)];
    }

    std::vector<std::unique_ptr<Engine>> engines_;
};

class BatchedSequences final : public StepBackend {
public:
    BatchedSequences(const std::string& path, EngineOptions options, size_t n) {
        if (n == 0) fail("make_batched: the slot count is 0");
        options.n_seq = n;
        engine_ = Engine::load(path, options);
        model_ = &engine_->model_for_batches();
        on_device_ = engine_->samples_on_device();
        if (model_->info().n_seq != n)
            fail("make_batched: the model holds %zu sequences, not %zu", model_->info().n_seq, n);
        cached_.resize(n);
        row_of_.resize(n);
    }

    size_t n_seqs() const override { return cached_.size(); }
    const Engine& engine() const override { return *engine_; }
    GrammarVocab& grammar_vocab() override { return engine_->grammar_vocab(); }
    const std::vector<int32_t>& cached_tokens(int seq) const override { return cached_[index(seq)]; }

    size_t begin(int seq, const std::vector<int32_t>& prompt) override {
        const size_t s = index(seq);
        const size_t n_vocab = model_->info().n_vocab;
        if (prompt.empty()) fail("begin: the prompt is empty");
        for (int32_t id : prompt)  // < 0: an image row (its embedding comes with the step)
            if (id >= 0 && static_cast<size_t>(id) >= n_vocab) fail("begin: token id %d is outside the vocabulary", id);
        if (model_->context_room(seq) != SIZE_MAX && prompt.size() >= model_->info().n_ctx)
            fail("begin: the prompt has %zu tokens but a slot holds %zu", prompt.size(), model_->info().n_ctx);
        const std::vector<int32_t>& cached = cached_[s];
        size_t common = 0;
        const size_t limit = std::min(cached.size(), prompt.size());
        // Rows match by their id (digest-derived: media.h); kAnonymousRow (a bidirectional span) never does.
        while (common < limit && cached[common] == prompt[common] && prompt[common] != kAnonymousRow) ++common;
        if (common == prompt.size()) --common;  // the last prompt token is recomputed for its logits
        const size_t kept = model_->truncate(common, seq);
        cached_[s].resize(kept);
        return kept;
    }
    size_t erase(int seq) override {
        const size_t s = index(seq);
        const size_t n = cached_[s].size();
        model_->truncate(0, seq);
        cached_[s].clear();
        return n;
    }

    void keep(int seq, size_t n) override {
        std::vector<int32_t>& cached = cached_[index(seq)];
        if (n >= cached.size()) return;
        const size_t kept = model_->truncate(n, seq);
        std::vector<int32_t> again(cached.begin() + std::ptrdiff_t(kept), cached.begin() + std::ptrdiff_t(n));
        cached.resize(kept);
        for (int32_t id : again)
            if (id < 0) fail("keep: sequence %d would recompute image rows it no longer has", seq);
        for (size_t from = 0; from < again.size();) {  // in steps the cache takes
            std::vector<SeqStep> one(1);
            one[0].seq = seq;
            const size_t n_step = std::min(again.size() - from, max_step_tokens());
            one[0].tokens.assign(again.begin() + std::ptrdiff_t(from), again.begin() + std::ptrdiff_t(from + n_step));
            step(one);
            from += one[0].tokens.size();
        }
    }

    void step(std::vector<SeqStep>& batch) override {
        tokens_.clear();
        seqs_.clear();
        marks_.clear();
        embd_.clear();
        group_.clear();
        const size_t n_embd = model_->info().n_embd;
        bool rows = false, groups = false;
        for (const SeqStep& item : batch) {
            rows = rows || item.embd != nullptr;
            groups = groups || item.group != nullptr;
        }
        for (SeqStep& item : batch) {
            if (item.tokens.empty()) fail("step: sequence %d has no tokens", item.seq);
            const size_t took = model_->reserve(item.tokens.size(), item.seq);
            if (took < item.tokens.size()) {
                item.tokens.resize(took);
                item.want_logits = false;
                item.all_logits = false;
            }
            tokens_.insert(tokens_.end(), item.tokens.begin(), item.tokens.end());
            seqs_.insert(seqs_.end(), item.tokens.size(), item.seq);
            marks_.insert(marks_.end(), item.tokens.size(), item.want_logits && item.all_logits ? 1 : 0);
            if (item.want_logits) marks_.back() = 1;
            if (rows) append_rows(item, n_embd);
            if (groups) {
                const size_t first = group_.size();
                group_.insert(group_.end(), item.tokens.size(), -1);
                if (item.group != nullptr)  // span ids are unique within a prompt; spans never cross sequences
                    std::copy(item.group, item.group + item.tokens.size(), group_.begin() + std::ptrdiff_t(first));
            }
        }
        Batch b;
        b.n = tokens_.size();
        b.tokens = tokens_.data();
        b.seq = seqs_.data();
        b.logits = marks_.data();
        if (rows) b.embd = embd_.data();
        if (groups) b.group = group_.data();
        const size_t k = candidates_wanted(batch);
        if (k > 0) {
            decode_candidates(b, batch, k);
            return;
        }
        model_->decode(b, &logits_);  // [n_marked, n_vocab] in batch order
        const size_t n_vocab = model_->info().n_vocab;
        size_t row = 0;
        for (SeqStep& item : batch) {
            std::vector<int32_t>& cached = cached_[index(item.seq)];
            cached.insert(cached.end(), item.tokens.begin(), item.tokens.end());
            item.logits.clear();
            item.top = TopCandidates();
            if (!item.want_logits) continue;
            const size_t rows = item.all_logits ? item.tokens.size() : 1;
            const float* r = logits_.data() + row * n_vocab;
            item.logits.assign(r, r + rows * n_vocab);
            row += rows;
        }
    }

    void fetch_logits(SeqStep& item) override {
        const size_t s = index(item.seq);
        if (item.top.ids.empty() || row_of_[s] == SIZE_MAX)
            fail("fetch_logits: sequence %d came with no candidates in the last step", item.seq);
        copy_kept_row(row_of_[s], &item.logits);
    }

    size_t context_room(int seq) const override { return model_->context_room(seq); }
    size_t n_ctx() const override { return model_->info().n_ctx; }
    size_t max_step_tokens() const override { return model_->n_batch(); }
    bool samples_on_device() const override { return on_device_; }

private:
    // The candidates a step asks for (the most any item wants), or 0 when it takes the logits: not
    // sampling where the logits are, no item asking, or a draft to verify (every row's logits).
    size_t candidates_wanted(const std::vector<SeqStep>& batch) const {
        if (!on_device_) return 0;
        size_t k = 0;
        for (const SeqStep& item : batch) {
            if (!item.want_logits) continue;
            if (item.all_logits) return 0;
            k = std::max(k, item.top_k);
        }
        return std::min(k, model_->info().n_vocab);
    }

    // The step through Model::decode_top: items that ask get their candidates (under their bans:
    // the first list asked for; an item with another list gets none applied, and its sampler then
    // declines them), the others their logits row.
    void decode_candidates(const Batch& b, std::vector<SeqStep>& batch, size_t k) {
        bans_.ids = nullptr;
        bans_.rows.clear();
        for (const SeqStep& item : batch) {
            if (!item.want_logits) continue;
            const bool asks = item.top_k > 0 && item.banned != nullptr && !item.banned->empty();
            if (asks && bans_.ids == nullptr) bans_.ids = item.banned;
            bans_.rows.push_back(asks && item.banned == bans_.ids ? 1 : 0);
        }
        model_->decode_top(b, k, &tops_, bans_.ids != nullptr ? &bans_ : nullptr);  // [n_marked] in batch order
        fetched_ = false;
        size_t row = 0;
        for (SeqStep& item : batch) {
            const size_t s = index(item.seq);
            cached_[s].insert(cached_[s].end(), item.tokens.begin(), item.tokens.end());
            item.logits.clear();
            item.top = TopCandidates();
            row_of_[s] = SIZE_MAX;
            if (!item.want_logits) continue;
            row_of_[s] = row;
            if (item.top_k > 0) {
                item.top = std::move(tops_[row]);
            } else {  // this one samples from the row
                copy_kept_row(row, &item.logits);
            }
            ++row;
        }
    }

    // Row `row` of the last decode_candidates step's logits (fetched once a step) into *out.
    void copy_kept_row(size_t row, std::vector<float>* out) {
        if (!fetched_) {
            model_->last_logits(&logits_);  // [n_marked, n_vocab]
            fetched_ = true;
        }
        const size_t n_vocab = model_->info().n_vocab;
        const float* r = logits_.data() + row * n_vocab;
        out->assign(r, r + n_vocab);
    }

    // The item's rows into embd_ ([n, n_embd] beside tokens_; text tokens' rows unused).
    void append_rows(const SeqStep& item, size_t n_embd) {
        const size_t first = embd_.size();
        embd_.resize(first + item.tokens.size() * n_embd, 0.0f);
        if (item.embd == nullptr) return;
        for (size_t i = 0; i < item.tokens.size(); ++i)
            if (item.tokens[i] < 0)
                std::copy(item.embd + i * n_embd, item.embd + (i + 1) * n_embd,
                          embd_.begin() + std::ptrdiff_t(first + i * n_embd));
    }

    size_t index(int seq) const {
        if (seq < 0 || static_cast<size_t>(seq) >= cached_.size())
            fail("BatchedSequences: sequence %d outside [0, %zu)", seq, cached_.size());
        return static_cast<size_t>(seq);
    }

    std::unique_ptr<Engine> engine_;
    Model* model_ = nullptr;
    std::vector<std::vector<int32_t>> cached_;  // per sequence: ids in its cache, in order
    std::vector<int32_t> tokens_, seqs_;        // [n] the step's batch
    std::vector<uint8_t> marks_;                // [n] 1 = logits wanted
    std::vector<float> embd_;                   // [n, n_embd] image rows of the step (when any)
    std::vector<int32_t> group_;                // [n] bidirectional span ids (when any)
    std::vector<float> logits_;                 // [n_marked, n_vocab]
    bool on_device_ = false;                    // the slots sample from candidates (Engine::samples_on_device)
    TopBans bans_;                              // decode_candidates' bans
    std::vector<TopCandidates> tops_;           // [n_marked] its candidates
    std::vector<size_t> row_of_;                // [n_seqs] each sequence's marked row in the last step (SIZE_MAX: none)
    bool fetched_ = false;                      // logits_ holds the last decode_top step's rows
};

}  // namespace

std::unique_ptr<StepBackend> make_batched(const std::string& model_path, const EngineOptions& options, size_t n_seqs) {
    return std::make_unique<BatchedSequences>(model_path, options, n_seqs);
}

std::unique_ptr<StepBackend> make_engine_per_slot(const std::string& model_path, const EngineOptions& options,
                                                  size_t n_seqs) {
    return std::make_unique<EnginePerSlot>(model_path, options, n_seqs);
}

}  // namespace cactus::server
