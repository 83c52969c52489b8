// KV memory on gemma3-270m: the bytes a 32k-token context takes follow the layout's arithmetic
// (3 global layers of n_ctx rows, 15 sliding rings of 512 + 512 - 1 rows, head_dim 256, one KV
// head), for f16, int8 and f32, and they do not grow while a conversation runs past the window.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus {
namespace {

std::string model_path() {
    const char* dir = std::getenv("CACTUS_MODELS");
    const char* home = std::getenv("HOME");
    return (dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/cactus/models") + "/gemma3-270m.gguf";
}

size_t expected_bytes(size_t n_ctx, KvType type) {
    const size_t head = 256;
    size_t row = 2 * head * 2 + 4;                                     // f16 K, V, position
    if (type == KvType::I8) row = 2 * head + 2 * (head / 32) * 4 + 4;  // int8 K, V, scales, position
    if (type == KvType::F32) row = 2 * head * 4 + 4;                   // f32 K, V, position
    return 3 * n_ctx * row + 15 * (512 + 512 - 1) * row;
}

TEST(KvMemory, Gemma3At32kFollowsTheLayout) {
    auto file = GgufFile::open(model_path());
    for (KvType type : {KvType::F16, KvType::I8, KvType::F32}) {
        ModelOptions o;
        o.n_ctx = 32768;
        o.n_threads = 1;
        o.kv.compress = 0;
        o.kv.type = static_cast<int>(type);
        auto model = Model::load(*file, o);
        EXPECT_EQ(model->kv_bytes(), expected_bytes(32768, type)) << kv_type_name(type);
    }
    // A real run past the window at a smaller size: the bytes stay what the layout predicts.
    ModelOptions o;
    o.n_ctx = 1024;
    o.n_threads = 2;
    o.n_batch = 256;
    o.kv.compress = 1;
    o.kv.compress_at = 512;
    o.kv.compress_to = 256;
    o.kv.type = static_cast<int>(KvType::I8);
    auto model = Model::load(*file, o);
    const size_t before = model->kv_bytes();
    std::vector<int32_t> tokens(1200);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(1000 + (i * 7919) % 5000);
    std::vector<float> logits;
    model->forward(tokens.data(), tokens.size(), &logits);
    EXPECT_EQ(model->n_past(), 1200u);
    EXPECT_GE(model->kv_compactions(), 3u);
    EXPECT_EQ(model->kv_bytes(), before);
    // Global layers hold 512 rows (kv_compress_at), rings 512 + 256 - 1.
    const size_t row = 2 * 256 + 2 * 8 * 4 + 4;
    EXPECT_EQ(before, 3 * 512 * row + 15 * (512 + 256 - 1) * row);
}

// The memory budget counts f32 rows at 4 bytes: a budget that holds the f16 cache and the
// activations but not the f32 cache refuses kv_cache_type f32 with the figures.
TEST(KvMemory, BudgetCountsF32Rows) {
    auto file = GgufFile::open(model_path());
    ModelOptions o;
    o.n_ctx = 32768;
    o.n_threads = 1;
    o.kv.compress = 0;
    o.kv.type = static_cast<int>(KvType::F16);
    // f16 needs 117 MB of KV (plus activations); f32 twice that.
    o.memory_budget = expected_bytes(32768, KvType::F16) + (size_t(64) << 20);
    EXPECT_NO_THROW(Model::load(*file, o));
    o.kv.type = static_cast<int>(KvType::F32);
    try {
        Model::load(*file, o);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
    }
}

// kv_cache_type f32 on the real model, through the model's KvOptions, with a prompt past the
// sliding window and one compaction: as with f16 rows, the logits do not depend on the prefill
// chunk, bit for bit (rows are summed in position order), whether the ring wraps (chunks of 61:
// 572 rows) or not (chunks of 256: 767 rows). How close f32 and f16 caches are is measured on exact
// weights and real text by test_int8_kv_precision.py; the bytes by the tests above.
TEST(KvMemory, Gemma3F32LogitsIndependentOfTheChunk) {
    auto file = GgufFile::open(model_path());
    std::vector<int32_t> tokens(620);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(1000 + (i * 7919) % 5000);
    std::vector<float> logits[2];
    const size_t chunks[2] = {256, 61};
    for (int i = 0; i < 2; ++i) {
        ModelOptions o;
        o.n_ctx = 1024;
        o.n_threads = 2;
        o.n_batch = chunks[i];
        o.kv.compress = 1;
        o.kv.compress_at = 580;
        o.kv.compress_to = 290;
        o.kv.type = static_cast<int>(KvType::F32);
        auto model = Model::load(*file, o);
        model->forward(tokens.data(), tokens.size(), &logits[i]);
        EXPECT_EQ(model->kv_compactions(), 1u);
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    for (float x : logits[0]) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0)
        << "f32 cache: prefill chunks of 256 and 61 give different logits";
}

}  // namespace
}  // namespace cactus
