#pragma once
// A loaded language model: hyper-parameters and weights from a GGUF file, a KV cache, and a
// forward pass that appends tokens to the cache and returns next-token logits.
//
// Architectures register in one table (src/models/registry.cpp); each block design lives in one
// file (src/models/llama.cpp for llama/qwen2/qwen3, gemma3.cpp, lfm2.cpp) over the decoder core
// (src/models/decoder.h) and the building blocks (src/models/blocks.h), which run on a backend (src/backends/backend.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kv/kv_options.h"
#include "models/intermediates.h"
#include "ops/top_candidates.h"

namespace cactus {

class GgufFile;
class ThreadPool;

struct ModelOptions {
    size_t n_ctx = 0;            // context length in tokens per sequence; 0 = min(model's trained context, 8192)
    int n_threads = 0;           // 0 = ThreadPool::default_threads()
    size_t n_batch = 512;        // max tokens per forward step (prefill is split internally)
    size_t n_seq = 1;            // independent sequences (each with its own KV cache), decoded together
    std::string device = "cpu";  // backend (src/backends/backend.h): "cpu", "cuda", "cuda:N"
    int gpu_timeout_ms = 0;      // longest wait for the GPU; 0 = $CACTUS_GPU_TIMEOUT_MS or 30000
    KvRequest kv;                // KV precision and compaction; unset fields take the defaults
    size_t memory_budget = 0;    // bytes for KV cache + activations; 0 = physical memory (model_budget.h)
};

// One forward step over n tokens of one or several sequences. Token i of the batch is either a
// token id (tokens[i] >= 0) or an embedding row (tokens == nullptr or tokens[i] < 0: row i of
// embd, e.g. an image's embeddings spliced in at its placeholder positions; not scaled like token
// embeddings). A sequence's tokens must continue it in order: pos[i] (when given) must equal the
// sequence's n_past plus the tokens of that sequence earlier in the batch.
struct Batch {
    size_t n = 0;
    const int32_t* tokens = nullptr;  // [n] token ids; < 0: take row i of embd
    const float* embd = nullptr;      // [n, n_embd] host rows (read where tokens says so)
    const int32_t* pos = nullptr;     // [n] index of each token in its sequence; nullptr = next ones
    const int32_t* seq = nullptr;     // [n] sequence id < n_seq; nullptr = all sequence 0
    const uint8_t* logits = nullptr;  // [n] 1 = return this token's logits; nullptr = last of each sequence
    // [n] bidirectional spans: adjacent tokens of one sequence with the same group id >= 0 attend
    // to each other in both directions (Gemma 3's image tokens); -1 or nullptr = causal. A span
    // must lie whole in one batch (prefill_media never splits one).
    const int32_t* group = nullptr;
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
    size_t n_ctx = 0;    // the cache's capacity in tokens (global layers, no compaction)
    size_t n_seq = 1;    // sequences (each with its own cache)
    std::string device;  // the backend's description
    KvOptions kv;        // resolved KV precision and compaction
};

class Model {
public:
    virtual ~Model() = default;

    // Loads the architecture that general.architecture names; throws cactus::Error on a missing
    // tensor, a wrong shape or an unsupported architecture. `file` must outlive the model.
    static std::unique_ptr<Model> load(const GgufFile& file, const ModelOptions& options);
    // The tensors of the file's architecture that a step reads a few rows of (Gemma 4's per-layer
    // embeddings): callers mark them GgufFile::keep_mapped before lock_in_memory, so they are
    // never copied or locked (only the rows read become resident). Empty for most architectures.
    static std::vector<std::string> mapped_tables(const GgufFile& file);

    virtual const ModelInfo& info() const = 0;

    // One step: appends the batch's tokens to their sequences and writes the logits of the tokens
    // marked in batch.logits to *logits ([n_marked, n_vocab], in batch order). The batch must fit
    // one step: n <= n_batch() and, per sequence, what its cache can take now (a sliding ring takes
    // at most its window per step); forward() below splits a long prompt into such steps.
    virtual void decode(const Batch& batch, std::vector<float>* logits) = 0;
    // Most tokens one decode() step takes.
    virtual size_t n_batch() const = 0;
    // decode(), but for each marked token its k largest logits with the row's maximum and
    // normalizer (Backend::top_k, after the final softcap) in *out, in batch order, instead of the
    // logits: a few bytes come back instead of n_vocab floats. The logits stay on the device until
    // the next step; last_logits() fetches them. 1 <= k <= kTopKMax. With bans (may be null), the
    // asking rows' banned logits are -inf before the candidates are taken (and in last_logits()).
    // Only where device_sampling() (the default throws).
    virtual void decode_top(const Batch& batch, size_t k, std::vector<TopCandidates>* out, const TopBans* bans);
    // The logits of the marked tokens of the last decode_top() step ([n_marked, n_vocab]); throws
    // when another step ran since, or when that step marked more tokens than one head pass holds.
    virtual void last_logits(std::vector<float>* logits);
    virtual bool device_sampling() const { return false; }
    // forward() of one token with decode_top(): its next token's top-k candidates in *out, the
    // logits of `banned` (may be null) -inf first.
    void forward_top(int32_t token, size_t k, TopCandidates* out, const std::vector<int32_t>* banned = nullptr,
                     int seq = 0);
    // decode(), but writing the final hidden states of the marked tokens (after the output norm:
    // the rows the output head reads) to *hidden ([n_marked, n_embd], in batch order) instead of
    // their logits. Embeddings pool these rows (engine/embedding.h).
    virtual void decode_hidden(const Batch& batch, std::vector<float>* hidden) = 0;

    // Appends tokens[0..n) to sequence `seq` in steps of at most n_batch() tokens and returns the
    // logits of the last token in *logits ([n_vocab]). With all_logits != nullptr, also returns
    // the logits of every token ([n, n_vocab], row-major). Throws when the cache would overflow.
    void forward(const int32_t* tokens, size_t n, std::vector<float>* logits, std::vector<float>* all_logits = nullptr,
                 int seq = 0);

    // Tokens appended to a sequence (compaction drops rows, not tokens: positions are logical).
    virtual size_t n_past(int seq = 0) const = 0;
    // Drops a sequence's cached tokens from token n on (keeps the prefix [0, n)); n <= n_past().
    // Returns the tokens kept: n, or fewer when only an earlier state can be restored exactly (0: n
    // before the last compaction, or sliding rows already overwritten; LFM2: the last conv-state
    // checkpoint before n); the caller then recomputes from there.
    virtual size_t truncate(size_t n, int seq = 0) = 0;
    void reset(int seq = 0) { truncate(0, seq); }

    // Tokens a sequence may still take before its context is full; SIZE_MAX with compaction on.
    virtual size_t context_room(int seq = 0) const = 0;
    // Most tokens of a sequence one step can append now (1..wanted); may compact the cache.
    virtual size_t reserve(size_t wanted, int seq = 0) = 0;
    // Bytes held by the KV caches (all sequences and layers, as laid out), compactions so far.
    virtual size_t kv_bytes() const = 0;
    virtual size_t kv_compactions() const = 0;
    // What the model's backend enqueued so far (kernels, copies, step graphs; zeros on the CPU).
    virtual BackendCounters backend_counters() const = 0;

    // Named intermediates (models/intermediates.h), for oracle comparisons: while names are
    // selected, every step keeps all of its rows and appends the named tensors' rows; an empty
    // list stops recording. take_intermediates() returns what was recorded and clears it.
    virtual void record_intermediates(const std::vector<std::string>& names) = 0;
    virtual Intermediates take_intermediates() = 0;
};

}  // namespace cactus
