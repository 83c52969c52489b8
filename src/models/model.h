#pragma once
// A loaded language model: hyper-parameters and weights from a GGUF file, a KV cache, and a
// forward pass that appends tokens to the cache and returns next-token logits.
//
// Architectures register in one table (src/models/registry.cpp); each lives in one file
// (src/models/llama.cpp, src/models/gemma3.cpp) built from shared helpers (src/models/layers.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_options.h"

namespace cactus {

class GgufFile;
class ThreadPool;

struct ModelOptions {
    size_t n_ctx = 0;     // context length in tokens; 0 = min(model's trained context, 8192)
    int n_threads = 0;    // 0 = ThreadPool::default_threads()
    size_t n_batch = 512; // max tokens per forward call chunk (prefill is split internally)
    KvRequest kv;         // KV precision and compaction; unset fields take the defaults
    size_t memory_budget = 0;  // bytes for KV cache + activations; 0 = physical memory (model_budget.h)
};

struct ModelInfo {
    std::string architecture;  // general.architecture
    std::string name;          // general.name (may be empty)
    size_t n_vocab = 0;
    size_t n_embd = 0;
    size_t n_layer = 0;
    size_t n_head = 0;
    size_t n_head_kv = 0;
    size_t n_ctx_train = 0;
    size_t n_ctx = 0;           // the cache's capacity in tokens (global layers, no compaction)
    KvOptions kv;               // resolved KV precision and compaction
};

class Model {
public:
    virtual ~Model() = default;

    // Loads the architecture that general.architecture names; throws cactus::Error on a missing
    // tensor, a wrong shape or an unsupported architecture. `file` must outlive the model.
    static std::unique_ptr<Model> load(const GgufFile& file, const ModelOptions& options);

    virtual const ModelInfo& info() const = 0;

    // Appends tokens[0..n) at positions n_past()..n_past()+n to the cache and returns the logits
    // of the last token in *logits ([n_vocab]). With all_logits != nullptr, also returns the logits
    // of every token ([n, n_vocab], row-major). Throws when the cache would overflow.
    virtual void forward(const int32_t* tokens, size_t n, std::vector<float>* logits,
                         std::vector<float>* all_logits = nullptr) = 0;

    // Tokens appended in the session (compaction drops rows, not tokens: positions are logical).
    virtual size_t n_past() const = 0;
    // Drops cached tokens from token n on (keeps the prefix [0, n)); n <= n_past(). Returns the
    // tokens kept: n, or 0 when the cache cannot restore that state exactly (n before the last
    // compaction, or sliding rows already overwritten); the caller then recomputes from there.
    virtual size_t truncate(size_t n) = 0;
    void reset() { truncate(0); }

    // Tokens that may still be appended before the context is full; SIZE_MAX with compaction on.
    virtual size_t context_room() const = 0;
    // Bytes held by the KV cache (all layers, as laid out), and compactions done so far.
    virtual size_t kv_bytes() const = 0;
    virtual size_t kv_compactions() const = 0;
};

}  // namespace cactus
