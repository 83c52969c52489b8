// Forward-pass invariants on the real model files (~/.cache/cactus/models or $CACTUS_MODELS):
// chunked prefill equals one unchunked pass; truncate() then re-forward gives the same logits;
// bad input throws. The numerical match with llama.cpp is tests/models/test_model_oracle.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus {
namespace {

std::string model_path(const char* name) {
    const char* dir = std::getenv("CACTUS_MODELS");
    const char* home = std::getenv("HOME");
    std::string base = dir ? dir : std::string(home ? home : "") + "/.cache/cactus/models";
    return base + "/" + name;
}

std::vector<int32_t> test_tokens(size_t n, size_t n_vocab) {
    std::vector<int32_t> t(n);
    uint32_t s = 12345;
    for (size_t i = 0; i < n; ++i) {
        s = s * 1103515245u + 12345u;
        t[i] = static_cast<int32_t>((s >> 8) % std::min<size_t>(n_vocab, 20000));
    }
    return t;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float m = 0.0f;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
    return m;
}

class ModelConsistency : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { file_ = GgufFile::open(model_path(GetParam())); }
    std::unique_ptr<Model> load(size_t n_batch) {
        ModelOptions o;
        o.n_ctx = 256;
        o.n_threads = 2;
        o.n_batch = n_batch;
        return Model::load(*file_, o);
    }
    std::unique_ptr<GgufFile> file_;
};

TEST_P(ModelConsistency, ChunkedPrefillEqualsUnchunked) {
    auto reference = load(512);
    const auto tokens = test_tokens(70, reference->info().n_vocab);
    std::vector<float> want_all, want_last;
    reference->forward(tokens.data(), tokens.size(), &want_last, &want_all);
    for (size_t n_batch : {1, 7, 64}) {
        auto model = load(n_batch);
        std::vector<float> all, last;
        model->forward(tokens.data(), tokens.size(), &last, &all);
        EXPECT_LT(max_abs_diff(all, want_all), 1e-2f) << "n_batch " << n_batch;
        EXPECT_LT(max_abs_diff(last, want_last), 1e-2f) << "n_batch " << n_batch;
        EXPECT_EQ(model->n_past(), tokens.size());
    }
    // Token-by-token decode after a prefill gives the same logits as the batched pass.
    auto model = load(512);
    std::vector<float> logits;
    model->forward(tokens.data(), 40, &logits);
    for (size_t i = 40; i < tokens.size(); ++i) model->forward(&tokens[i], 1, &logits);
    EXPECT_LT(max_abs_diff(logits, want_last), 1e-2f);
}

// Past gemma3's sliding window (512) the ring of a sliding layer wraps, at a row that depends on
// the prefill chunk (the ring holds sinks + window + chunk - 1 rows: 522 for chunks of 7, 771 for
// 256). Attention sums the visible rows in position order, not row order, so the chunk size changes
// no bit of any logit. (Before, this moved gemma3's next-token distribution by a mean KL of 0.01.)
TEST_P(ModelConsistency, ChunkSizeChangesNoBitAcrossRingWrap) {
    if (std::string(GetParam()) != "gemma3-270m.gguf") GTEST_SKIP() << "no sliding-window layers";
    auto load_ctx = [&](size_t n_batch) {
        ModelOptions o;
        o.n_ctx = 600;
        o.n_threads = 2;
        o.n_batch = n_batch;
        return Model::load(*file_, o);
    };
    auto reference = load_ctx(256);
    auto chunked = load_ctx(7);
    const auto tokens = test_tokens(560, reference->info().n_vocab);
    std::vector<float> want, got;
    const size_t prefix = 500;
    reference->forward(tokens.data(), prefix, &want);
    chunked->forward(tokens.data(), prefix, &got);
    for (size_t done = prefix; done < tokens.size(); done += 6) {  // the ring of chunks of 7 wraps at 522
        reference->forward(tokens.data() + done, 6, &want);
        chunked->forward(tokens.data() + done, 6, &got);
        ASSERT_EQ(got.size(), want.size());
        size_t n_diff = 0;
        for (size_t i = 0; i < got.size(); ++i) n_diff += got[i] != want[i];
        EXPECT_EQ(n_diff, 0u) << "logits after token " << done + 6 << ": " << max_abs_diff(got, want);
    }
}

TEST_P(ModelConsistency, TruncateThenReforwardGivesSameLogits) {
    auto model = load(512);
    const auto tokens = test_tokens(50, model->info().n_vocab);
    std::vector<float> first, again, other;
    model->forward(tokens.data(), tokens.size(), &first);
    model->truncate(30);
    EXPECT_EQ(model->n_past(), 30u);
    const std::vector<int32_t> detour = {5, 6, 7};
    model->forward(detour.data(), detour.size(), &other);
    EXPECT_GT(max_abs_diff(other, first), 1e-2f);  // a different continuation, different logits
    model->truncate(30);
    model->forward(tokens.data() + 30, tokens.size() - 30, &again);
    EXPECT_LT(max_abs_diff(again, first), 1e-3f);
    model->reset();
    EXPECT_EQ(model->n_past(), 0u);
    model->forward(tokens.data(), tokens.size(), &again);
    EXPECT_LT(max_abs_diff(again, first), 1e-3f);
}

TEST_P(ModelConsistency, BadInputThrows) {
    auto model = load(64);
    const int32_t bad[] = {1, -1};
    std::vector<float> logits;
    EXPECT_THROW(model->forward(bad, 2, &logits), Error);
    const int32_t too_big = static_cast<int32_t>(model->info().n_vocab);
    EXPECT_THROW(model->forward(&too_big, 1, &logits), Error);
    EXPECT_THROW(model->forward(bad, 0, &logits), Error);
    EXPECT_THROW(model->truncate(model->n_past() + 1), Error);
    const auto tokens = test_tokens(257, model->info().n_vocab);
    EXPECT_THROW(model->forward(tokens.data(), tokens.size(), &logits), Error);  // n_ctx 256
    EXPECT_EQ(model->n_past(), 0u);
    model->forward(tokens.data(), 256, &logits);  // exactly full is fine
    EXPECT_EQ(model->n_past(), 256u);
    const int32_t one = 1;
    EXPECT_THROW(model->forward(&one, 1, &logits), Error);
    EXPECT_GT(model->kv_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(RealModels, ModelConsistency, ::testing::Values("smollm2-135m.gguf", "gemma3-270m.gguf"));

}  // namespace
}  // namespace cactus
