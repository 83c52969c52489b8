// Embeddings from a decoder (any chat model): the final hidden states of the text's tokens, after
// the output norm, pooled. This is what Cactus does for its chat models (mean pooling); embedding
// models trained on a decoder (Qwen3-Embedding) name last-token pooling in their GGUF.
#include <algorithm>

#include "core/error.h"
#include "engine/embedding.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

namespace {

// The file's <arch>.pooling_type when it names one; a decoder has no rank head, so none/rank and
// absent mean the fallback.
Pooling pooling_from_file(const GgufFile& file, Pooling fallback) {
    const std::string key = file.get_string("general.architecture", "") + ".pooling_type";
    if (!file.has(key)) return fallback;
    const std::optional<Pooling> pooling = pooling_from_type(file.get_uint(key));
    return pooling && *pooling != Pooling::NONE ? *pooling : fallback;
}

class DecoderEmbedder : public TextEmbedder {
public:
    explicit DecoderEmbedder(Engine& engine)
        : engine_(engine), pooling_(pooling_from_file(engine.file(), Pooling::MEAN)) {}

    size_t dim() const override { return engine_.model().info().n_embd; }
    size_t max_tokens() const override { return engine_.model().info().n_ctx; }
    Pooling default_pooling() const override { return pooling_; }
    const Tokenizer& tokenizer() const override { return engine_.tokenizer(); }
    std::string name() const override {
        const ModelInfo& info = engine_.model().info();
        return info.architecture + (info.name.empty() ? "" : " " + info.name);
    }

protected:
    void hidden_states(const std::vector<std::vector<int32_t>>& seqs, std::vector<std::vector<float>>* out) override {
        // Each text runs alone in sequence 0 from an empty cache (the session is forgotten).
        out->assign(seqs.size(), {});
        struct Forget {
            Engine& engine;
            ~Forget() { engine.reset(); }
        } forget{engine_};
        for (size_t i = 0; i < seqs.size(); ++i) {
            engine_.reset();
            run_sequence(seqs[i], &(*out)[i]);
        }
    }

private:
    void run_sequence(const std::vector<int32_t>& ids, std::vector<float>* hidden) {
        Model& model = engine_.model_for_batches();
        const size_t d = dim();
        hidden->resize(ids.size() * d);
        std::vector<uint8_t> all(model.n_batch(), 1);
        std::vector<float> rows;
        for (size_t done = 0; done < ids.size();) {
            const size_t n = model.reserve(std::min(ids.size() - done, model.n_batch()));
            Batch batch;
            batch.n = n;
            batch.tokens = ids.data() + done;
            batch.logits = all.data();
            model.decode_hidden(batch, &rows);
            CACTUS_ASSERT(rows.size() == n * d);
            std::copy(rows.begin(), rows.end(), hidden->begin() + static_cast<std::ptrdiff_t>(done * d));
            done += n;
        }
    }

    Engine& engine_;
    Pooling pooling_;
};

}  // namespace

std::unique_ptr<TextEmbedder> TextEmbedder::over_decoder(Engine& engine) {
    return std::make_unique<DecoderEmbedder>(engine);
}

}  // namespace cactus
