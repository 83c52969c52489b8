#include "step_backend.h"

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
    const std::vector<int32_t>& cached_tokens(int seq) const override { return at(seq).cached_tokens(); }
    size_t begin(int seq, const std::vector<int32_t>& prompt) override { return at(seq).keep_prefix(prompt); }

    void step(std::vector<SeqStep>& batch) override {
        for (SeqStep& s : batch) {
            s.logits.clear();
            at(s.seq).append(s.tokens.data(), s.tokens.size(), &s.logits);
            if (!s.want_logits) s.logits.clear();
        }
    }

    size_t context_room(int seq) const override { return at(seq).context_room(); }
    size_t n_ctx() const override { return engines_[0]->model().info().n_ctx; }

private:
    Engine& at(int seq) const {
        if (seq < 0 || static_cast<size_t>(seq) >= engines_.size())
            fail("EnginePerSlot: sequence %d outside [0, %zu)", seq, engines_.size());
        return *engines_[static_cast<size_t>(seq)];
    }

    std::vector<std::unique_ptr<Engine>> engines_;
};

}  // namespace

std::unique_ptr<StepBackend> make_engine_per_slot(const std::string& model_path,
                                                  const EngineOptions& options, size_t n_seqs) {
    return std::make_unique<EnginePerSlot>(model_path, options, n_seqs);
}

}  // namespace cactus::server
