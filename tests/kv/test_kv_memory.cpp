// KV memory on gemma3-270m: the bytes a 32k-token context takes follow the layout's arithmetic
// (3 global layers of n_ctx rows, 15 sliding rings of 512 + 512 - 1 rows, head_dim 256, one KV
// head), for f16 and int8, and they do not grow while a conversation runs past the window.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus {
namespace {

std::string model_path() {
    const char* dir = std::getenv("CACTUS_MODELS");
    const char* home = std::getenv("HOME");
    return (dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/cactus/models") + "/gemma3-270m.gguf";
}

size_t expected_bytes(size_t n_ctx, bool int8) {
    const size_t head = 256;
    const size_t row = int8 ? 2 * head + 2 * (head / 32) * 4 + 4 : 2 * head * 2 + 4;  // K, V, scales, position
    return 3 * n_ctx * row + 15 * (512 + 512 - 1) * row;
}

TEST(KvMemory, Gemma3At32kFollowsTheLayout) {
    auto file = GgufFile::open(model_path());
    for (bool int8 : {false, true}) {
        ModelOptions o;
        o.n_ctx = 32768;
        o.n_threads = 1;
        o.kv.compress = 0;
        o.kv.type = static_cast<int>(int8 ? KvType::I8 : KvType::F16);
        auto model = Model::load(*file, o);
        EXPECT_EQ(model->kv_bytes(), expected_bytes(32768, int8));
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

}  // namespace
}  // namespace cactus
