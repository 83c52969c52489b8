// Sampling on the device (Model::decode_top, Sampler::sample_from_top) on a real model, on every
// device of available_devices(): a step's candidates are the top_k of its kept logits, which are
// decode()'s, and
// replies with the device path forced on and off (CACTUS_DEVICE_SAMPLING, read per reply) are the
// same tokens, greedy and sampled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
};

TEST_P(DeviceSampling, DecodeTopMatchesDecodeLogits) {
    auto file = GgufFile::open(cactus::testing::test_model_path("smollm2-135m"));
    ModelOptions o;
    o.n_ctx = 128;
    o.n_threads = 2;
    o.device = GetParam();
    auto plain = Model::load(*file, o);
    auto top = Model::load(*file, o);
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
    EXPECT_THROW(top->decode_top(Batch{}, 0, nullptr), Error);
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
    };
    const Setting settings[] = {{"greedy", 0.0f, 0, 1.0f, 0.0f},
                                {"top_k", 0.8f, 40, 1.0f, 0.0f},
                                {"top_p", 0.9f, 0, 0.9f, 0.0f},
                                {"min_p", 1.0f, 0, 1.0f, 0.1f},
                                {"chain", 0.7f, 40, 0.95f, 0.05f}};
    for (const Setting& st : settings) {
        GenerationOptions g;
        g.max_tokens = 48;
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
    }
}

std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), ':', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceSampling, ::testing::ValuesIn(available_devices()), device_name);

}  // namespace
