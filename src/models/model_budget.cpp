#include "models/model_budget.h"

#include <unistd.h>

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace cactus {

namespace {

constexpr size_t kSizeMax = std::numeric_limits<size_t>::max();

size_t mul(size_t a, size_t b) {
    size_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? kSizeMax : r;
}

size_t add(size_t a, size_t b) {
    size_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? kSizeMax : r;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

size_t predict_activation_bytes(const ActivationDims& d) {
    size_t per_token = mul(3, d.n_embd);
    per_token = add(per_token, d.q_width);
    per_token = add(per_token, d.k_width);
    per_token = add(per_token, d.v_width);
    per_token = add(per_token, d.attn_width);
    per_token = add(per_token, mul(2, d.n_ff));
    size_t floats = mul(d.n_batch, per_token);
    floats = add(floats, d.n_vocab);  // logits of the last token
    // Attention scratch: scores of a head group over the cache rows, per thread.
    floats = add(floats, mul(d.n_threads, mul(d.head_group, d.scratch_rows)));
    return mul(floats, sizeof(float));
}

size_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0;
    return mul(static_cast<size_t>(pages), static_cast<size_t>(page));
}

void check_memory_budget(const ModelMemoryPlan& plan, size_t n_ctx, size_t n_ctx_train, size_t budget_bytes) {
    if (n_ctx_train != 0 && n_ctx > n_ctx_train) {
        fail("Model::load: n_ctx %zu exceeds the model's trained context of %zu tokens", n_ctx, n_ctx_train);
    }
    const size_t budget = budget_bytes != 0 ? budget_bytes : physical_memory_bytes();
    if (budget != 0 && plan.total() > budget) {
        fail(
            "Model::load: n_ctx %zu needs %.1f MiB (KV cache %.1f MiB + activations %.1f MiB) but the memory "
            "budget is %.1f MiB; lower n_ctx or prefill_chunk, or use kv_cache_type int8",
            n_ctx, mib(plan.total()), mib(plan.kv_bytes), mib(plan.activation_bytes), mib(budget));
    }
}

void check_layer_count(const GgufFile& file, size_t n_layer) {
    if (n_layer > file.tensors().size()) {
        fail("read_hparams: block_count %zu is more than the %zu tensors in the file", n_layer, file.tensors().size());
    }
}

}  // namespace cactus
