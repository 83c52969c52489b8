// KV memory on gemma3-270m: the bytes a 32k-token context takes follow the layout's arithmetic
// (3 global layers of n_ctx rows, 15 sliding rings of 512 + 512 - 1 rows, head_dim 256, one KV
// head), for f16, int8 and f32, and they do not grow while a conversation runs past the window.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
// sliding window (rings wrap) and one compaction: the bytes are twice the f16 cache's (positions
// apart), and, as with f16 rows, the logits do not depend on the prefill chunk (bit for bit: rows
// are summed in position order). How close f32 and f16 caches are is measured on exact weights and
// real text by test_int8_kv_precision.py; here it is only printed (random tokens, quantized matmuls).
TEST(KvMemory, Gemma3F32CacheRuns) {
    auto file = GgufFile::open(model_path());
    std::vector<int32_t> tokens(700);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(1000 + (i * 7919) % 5000);
    struct Run {
        KvType type;
        size_t n_batch;
        std::vector<float> logits;
        size_t bytes = 0;
    };
    Run runs[3] = {{KvType::F16, 256, {}}, {KvType::F32, 256, {}}, {KvType::F32, 61, {}}};
    for (Run& r : runs) {
        ModelOptions o;
        o.n_ctx = 1024;
        o.n_threads = 2;
        o.n_batch = r.n_batch;
        o.kv.compress = 1;
        o.kv.compress_at = 600;
        o.kv.compress_to = 300;
        o.kv.type = static_cast<int>(r.type);
        auto model = Model::load(*file, o);
        model->forward(tokens.data(), tokens.size(), &r.logits);
        EXPECT_EQ(model->kv_compactions(), 1u);
        r.bytes = model->kv_bytes();
    }
    const size_t positions = 3 * 600 * 4 + 15 * (512 + 256 - 1) * 4;  // rings sized for a chunk of 256
    EXPECT_EQ(runs[1].bytes - positions, 2 * (runs[0].bytes - positions));
    ASSERT_EQ(runs[1].logits.size(), runs[2].logits.size());
    EXPECT_EQ(std::memcmp(runs[1].logits.data(), runs[2].logits.data(), runs[1].logits.size() * sizeof(float)), 0)
        << "f32 cache: prefill chunks of 256 and 61 give different logits";
    double diff = 0.0, norm = 0.0;
    for (size_t v = 0; v < runs[0].logits.size(); ++v) {
        const double d = static_cast<double>(runs[1].logits[v]) - runs[0].logits[v];
        ASSERT_TRUE(std::isfinite(runs[1].logits[v]));
        diff += d * d;
        norm += static_cast<double>(runs[0].logits[v]) * runs[0].logits[v];
    }
    std::printf("[ gemma3 f32 vs f16 KV, random tokens ] logits NMSE %.3g\n", diff / norm);
    EXPECT_GT(diff, 0.0);  // the f32 run did not use f16 rows
}

}  // namespace
}  // namespace cactus
