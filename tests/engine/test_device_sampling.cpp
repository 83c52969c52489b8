// Sampling on the device (Model::decode_top, Sampler::sample_from_top) on a real model, on every
// device of available_devices(): a step's candidates are the top_k of its kept logits, which are
// decode()'s, and
// replies with the device path forced on and off (CACTUS_DEVICE_SAMPLING, read per reply) are the
// same tokens, greedy and sampled, with and without bans (ignore_eos), which decode_top applies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/test_models.h"
#include "core/error.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "ops/ops_ref.h"

using namespace cactus;

namespace {

class DeviceSampling : public ::testing::TestWithParam<std::string> {
protected:
    void TearDown() override { unsetenv("CACTUS_DEVICE_SAMPLING"); }
    // smollm2-135m on the parameter's device (the file outlives the models).
    std::unique_ptr<Model> load() {
        if (!file_) file_ = GgufFile::open(cactus::testing::test_model_path("smollm2-135m"));
        ModelOptions o;
        o.n_ctx = 128;
        o.n_threads = 2;
        o.device = GetParam();
        return Model::load(*file_, o);
    }
    std::unique_ptr<GgufFile> file_;
};

TEST_P(DeviceSampling, DecodeTopMatchesDecodeLogits) {
    auto plain = load();
    auto top = load();
    ASSERT_TRUE(top->device_sampling());
    const size_t n_vocab = plain->info().n_vocab;
    const std::vector<int32_t> prompt = {1, 504, 3458, 314, 253, 1345, 28};
    std::vector<float> logits, kept;
    plain->forward(prompt.data(), prompt.size(), &logits);
    top->forward(prompt.data(), prompt.size(), &logits);
    int32_t token = 42;
    for (int step = 0; step < 6; ++step) {
        plain->forward(&token, 1, &logits);
        TopCandidates c;
        top->forward_top(token, 40, &c);
        top->last_logits(&kept);
        // Two models of one device: the same kernels (equal on the CPU; a device's sums may differ in order).
        ASSERT_EQ(kept.size(), logits.size());
        float worst = 0.0f, scale = 1.0f;
        for (size_t i = 0; i < kept.size(); ++i) {
            worst = std::max(worst, std::fabs(kept[i] - logits[i]));
            scale = std::max(scale, std::fabs(logits[i]));
        }
        EXPECT_LE(worst, 1e-4f * scale) << "step " << step;
        if (GetParam() == "cpu") {
            EXPECT_EQ(kept, logits) << "step " << step;
        }
        std::vector<int32_t> ids(40);
        std::vector<float> vals(40), stats(2);
        top_k_row_ref(ids.data(), vals.data(), stats.data(), kept.data(), n_vocab, 40);
        EXPECT_EQ(c.ids, ids) << "step " << step;
        EXPECT_EQ(c.logits, vals) << "step " << step;
        EXPECT_EQ(c.max_logit, stats[0]);
        EXPECT_NEAR(c.sum_exp, stats[1], 1e-5 * stats[1]);
        EXPECT_EQ(c.n_vocab, n_vocab);
        token = ids[3];
    }
    EXPECT_THROW(top->decode_top(Batch{}, 0, nullptr, nullptr), Error);
}

TEST_P(DeviceSampling, BansAreAppliedToTheRowsThatAskBeforeTheCandidates) {
    // Three marked tokens of one sequence; rows 0 and 2 ban a list holding each row's own argmax
    // (so the ban changes the answer) and an id past the vocabulary (ignored).
    auto plain = load();
    auto top = load();
    const size_t n_vocab = plain->info().n_vocab, k = 8;
    const std::vector<int32_t> prompt = {1, 504, 3458, 314, 253, 1345, 28, 42, 17};
    const std::vector<uint8_t> marks(prompt.size(), 1);
    const std::vector<int32_t> seq(prompt.size(), 0);
    Batch b;
    b.n = 3;
    b.tokens = prompt.data();
    b.seq = seq.data();
    b.logits = marks.data();
    std::vector<float> logits;
    plain->decode(b, &logits);  // [3, n_vocab]
    std::vector<int32_t> banned;
    for (size_t r = 0; r < 3; r += 2)
        banned.push_back(
            static_cast<int32_t>(std::max_element(logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab) -
                                 (logits.begin() + r * n_vocab)));
    banned.push_back(static_cast<int32_t>(n_vocab) + 5);
    TopBans bans;
    bans.ids = &banned;
    bans.rows = {1, 0, 1};
    std::vector<TopCandidates> c;
    top->decode_top(b, k, &c, &bans);
    ASSERT_EQ(c.size(), 3u);
    std::vector<float> kept;
    top->last_logits(&kept);
    ASSERT_EQ(kept.size(), 3 * n_vocab);
    for (size_t r = 0; r < 3; ++r) {
        std::vector<float> want(logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab);
        const float* got = kept.data() + r * n_vocab;
        if (bans.rows[r] != 0)
            for (int32_t id : banned)
                if (static_cast<size_t>(id) < n_vocab) {
                    EXPECT_EQ(got[id], -INFINITY) << "row " << r << " id " << id;
                    want[static_cast<size_t>(id)] = -INFINITY;
                }
        float worst = 0.0f;
        for (size_t i = 0; i < n_vocab; ++i)
            if (std::isfinite(want[i])) worst = std::max(worst, std::fabs(got[i] - want[i]));
        EXPECT_LE(worst, 1e-3f) << "row " << r;
        std::vector<int32_t> ids(k);
        std::vector<float> vals(k), stats(2);
        top_k_row_ref(ids.data(), vals.data(), stats.data(), got, n_vocab, k);
        EXPECT_EQ(c[r].ids, ids) << "row " << r;
        EXPECT_EQ(c[r].logits, vals) << "row " << r;
        EXPECT_NEAR(c[r].sum_exp, stats[1], 1e-5 * stats[1]) << "row " << r;
        EXPECT_EQ(c[r].banned, bans.rows[r] != 0 ? &banned : nullptr) << "row " << r;
        if (bans.rows[r] != 0) {
            EXPECT_NE(c[r].ids[0], banned[r / 2]) << "row " << r;
        }
    }
    bans.rows = {1, 0};
    EXPECT_THROW(top->decode_top(b, k, &c, &bans), Error);  // a flag per marked token
}

TEST_P(DeviceSampling, RepliesAreTheSameWithTheDevicePathOnAndOff) {
    EngineOptions eo;
    eo.n_ctx = 512;
    eo.n_threads = 2;
    eo.device = GetParam();
    auto e = Engine::load(cactus::testing::test_model_path("smollm2-135m"), eo);
    const std::string prompt = "The three most useful kitchen tools are";
    struct Setting {
        const char* name;
        float temperature;
        int top_k;
        float top_p;
        float min_p;
        bool ignore_eos;
    };
    // The greedy reply ends (end of turn) before 64 tokens: with ignore_eos the bans decide steps.
    const Setting settings[] = {
        {"greedy", 0.0f, 0, 1.0f, 0.0f, false},          {"top_k", 0.8f, 40, 1.0f, 0.0f, false},
        {"top_p", 0.9f, 0, 0.9f, 0.0f, false},           {"min_p", 1.0f, 0, 1.0f, 0.1f, false},
        {"chain", 0.7f, 40, 0.95f, 0.05f, false},        {"greedy ignore_eos", 0.0f, 0, 1.0f, 0.0f, true},
        {"top_k ignore_eos", 0.8f, 40, 1.0f, 0.0f, true}};
    for (const Setting& st : settings) {
        GenerationOptions g;
        g.max_tokens = 64;
        g.ignore_eos = st.ignore_eos;
        g.sampling.temperature = st.temperature;
        g.sampling.top_k = st.top_k;
        g.sampling.top_p = st.top_p;
        g.sampling.min_p = st.min_p;
        g.sampling.seed = 1234;
        setenv("CACTUS_DEVICE_SAMPLING", "0", 1);
        e->reset();
        const CompletionResult off = e->complete(prompt, g, nullptr);
        setenv("CACTUS_DEVICE_SAMPLING", "1", 1);
        e->reset();
        const CompletionResult on = e->complete(prompt, g, nullptr);
        EXPECT_EQ(on.tokens, off.tokens) << st.name;
        ASSERT_EQ(on.token_probabilities.size(), off.token_probabilities.size()) << st.name;
        for (size_t i = 0; i < on.token_probabilities.size(); ++i)
            EXPECT_NEAR(on.token_probabilities[i], off.token_probabilities[i], 1e-5) << st.name << " token " << i;
        EXPECT_GT(on.tokens.size(), 4u) << st.name;
        if (st.ignore_eos) {
            EXPECT_EQ(on.tokens.size(), g.max_tokens) << st.name;
        }
        if (std::string(st.name) == "greedy") {
            EXPECT_EQ(on.finish_reason, "stop") << "the bans would decide nothing";
        }
    }
}

std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), ':', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceSampling, ::testing::ValuesIn(available_devices()), device_name);

}  // namespace
