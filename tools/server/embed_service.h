#pragma once
// The server's text embedder (docs/SERVER.md, "Embeddings and rerank"). The served Engine belongs to
// the scheduler thread, so embeddings come from a TextEmbedder of their own: the --embedding-model
// file, or the served model's file loaded a second time (its weights are mmapped, so the pages are
// shared) on the first embedding request. Requests take turns (a mutex waited on until the
// request's deadline); each is one batched TextEmbedder call.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/embedding.h"
#include "engine/engine.h"
#include "job.h"

namespace cactus::server {

// An embedder and, for a decoder file, the Engine it runs over (nullptr for an encoder).
struct LoadedEmbedder {
    std::unique_ptr<Engine> engine;
    std::unique_ptr<TextEmbedder> embedder;
};
// An encoder-only file (TextEmbedder::is_encoder_file) through load_encoder; any other through
// Engine::load and TextEmbedder::over_decoder. Throws cactus::Error.
LoadedEmbedder load_embedder(const std::string& path, const EngineOptions& options);

// One input of a request: a text, or token ids the client made.
struct EmbedInput {
    std::string text;
    std::vector<int32_t> ids;
    bool is_ids = false;
};

struct EmbedRequest {
    std::vector<EmbedInput> inputs;  // not empty
    const char* param = "input";     // the request field they came from (named in errors)
    bool normalize = true;
    bool truncate = true;
    bool pooled_only = false;  // the OpenAI endpoint: pooling none is a 400 (as llama-server)
    size_t dimensions = 0;     // keep the first n values (then re-normalise); 0 = all
    Clock::time_point deadline;
};

struct EmbedResult {
    std::vector<Embedding> rows;  // one per input
    size_t prompt_tokens = 0;
    double load_ms = 0;  // spent loading the model for this request
    double total_ms = 0;
    Pooling pooling = Pooling::MEAN;  // the pooling the rows went through
    std::string model;                // the embedder's name (logs, /props)
};

class EmbedService {
public:
    // pooling: the --pooling override of the model's own (unset: the model's).
    EmbedService(std::string model_path, EngineOptions options, std::optional<Pooling> pooling);
    ~EmbedService();

    // Loads the model now (at start-up: errors then stop the server instead of a request).
    void load();
    // Throws HttpError: 400 for bad inputs, 503 when the turn does not come before the deadline,
    // 500 when the model does not load.
    EmbedResult embed(const EmbedRequest& request);
    const std::string& model_path() const { return path_; }

private:
    double load_locked();  // returns the milliseconds spent (0 when loaded before)
    std::vector<std::vector<int32_t>> tokens_of(const EmbedRequest& request) const;

    std::string path_;
    EngineOptions options_;
    std::optional<Pooling> pooling_;
    std::timed_mutex mutex_;
    LoadedEmbedder loaded_;
    std::string load_error_;
};

// Keeps the first `n` values of a pooled vector, then scales it to unit length when `normalize`.
void keep_dimensions(Embedding* e, size_t n, bool normalize);
// llama-server's embd_normalize: -1 none, 0 max-abs scaled to the int16 range, 1 taxicab, 2 Euclidean,
// > 2 p-norm; each row on its own.
void normalize_rows(Embedding* e, int mode);

}  // namespace cactus::server
