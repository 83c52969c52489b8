// Hyper-parameters from metadata must not drive allocations before the tensors are checked, and
// n_ctx is checked against the trained context and a memory budget before anything is allocated.
// A hook on operator new records the largest single allocation while a load runs (and refuses any
// above 64 MiB, so a regression fails the test instead of swapping the host).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "common/test_models.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "models/model.h"

namespace {

std::atomic<bool> g_watch{false};
std::atomic<size_t> g_largest{0};
constexpr size_t kRefuseAbove = size_t(64) << 20;

void* allocate(size_t n) {
    if (g_watch.load(std::memory_order_relaxed)) {
        size_t seen = g_largest.load();
        while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
        }
        if (n > kRefuseAbove) throw std::bad_alloc();
    }
    void* p = std::malloc(n == 0 ? 1 : n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace cactus {
namespace {

// Runs fn with the hook on; returns the error message ("" when none) and the largest allocation.
std::string load_error(const std::function<void()>& fn, size_t* largest) {
    std::string error;
    g_largest = 0;
    g_watch = true;
    try {
        fn();
    } catch (const Error& e) {
        error = e.what();
    } catch (const std::bad_alloc&) {
        error = "bad_alloc";
    }
    g_watch = false;
    *largest = g_largest.load();
    return error;
}

// A 100-odd KiB file claiming a model of tens of GB: only token_embd exists.
std::vector<uint8_t> huge_claims_file(uint32_t n_embd, uint32_t n_ff, uint32_t n_layer) {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", n_layer);
    w.add_u32("llama.embedding_length", n_embd);
    w.add_u32("llama.feed_forward_length", n_ff);
    w.add_u32("llama.attention.head_count", 64);
    w.add_u32("llama.context_length", 8192);
    std::vector<uint16_t> embd(n_embd, 0);  // f16 {n_embd, 1}: one token
    w.add_tensor("token_embd.weight", DType::F16, {n_embd, 1}, embd.data(), embd.size() * 2);
    return w.to_bytes();
}

TEST(ModelBudget, HugeHyperParametersFailBeforeAnyLargeAllocation) {
    const std::vector<uint8_t> bytes = huge_claims_file(65536, 1 << 20, 1);
    ASSERT_LT(bytes.size(), 200u * 1024);
    auto file = GgufFile::from_memory(bytes.data(), bytes.size());
    size_t largest = 0;
    std::string error = load_error([&] { Model::load(*file, ModelOptions{}); }, &largest);
    EXPECT_NE(error.find("blk.0.attn_norm.weight is missing"), std::string::npos) << error;
    EXPECT_LT(largest, size_t(4) << 20) << "bytes in one allocation before the tensors were checked";
}

TEST(ModelBudget, LayerCountBeyondTheFileFailsBeforePerLayerAllocation) {
    const std::vector<uint8_t> bytes = huge_claims_file(64, 128, 1 << 20);
    auto file = GgufFile::from_memory(bytes.data(), bytes.size());
    size_t largest = 0;
    std::string error = load_error([&] { Model::load(*file, ModelOptions{}); }, &largest);
    EXPECT_NE(error.find("block_count"), std::string::npos) << error;
    EXPECT_LT(largest, size_t(4) << 20);
}

TEST(ModelBudget, ContextBeyondTrainingOrBudgetFailsWithTheFigures) {
    auto file = GgufFile::open(testing::test_model_path("smollm2-135m"));
    ModelOptions o;
    o.n_threads = 1;
    o.n_ctx = 1u << 20;
    size_t largest = 0;
    std::string error = load_error([&] { Model::load(*file, o); }, &largest);
    EXPECT_NE(error.find("trained context"), std::string::npos) << error;
    EXPECT_LT(largest, size_t(4) << 20);
    o.n_ctx = 2048;
    o.memory_budget = size_t(8) << 20;  // far below the KV cache of 2048 tokens
    error = load_error([&] { Model::load(*file, o); }, &largest);
    EXPECT_NE(error.find("memory budget is 8.0 MiB"), std::string::npos) << error;
    EXPECT_NE(error.find("KV cache"), std::string::npos) << error;
    EXPECT_LT(largest, size_t(4) << 20);
    o.memory_budget = 0;  // the machine's memory: loads
    auto model = Model::load(*file, o);
    EXPECT_EQ(model->info().n_ctx, 2048u);
}

}  // namespace
}  // namespace cactus
