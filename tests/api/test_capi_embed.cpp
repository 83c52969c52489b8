// cactus_embed and friends on real models: the Cactus return contract (count of floats, -1, -2),
// what normalisation means, and that a chat handle still answers after embedding. Equality with an
// independent implementation is tests/api/test_embed_oracle.py (llama.cpp) and the MiniLM goldens.
#include <cmath>
#include <string>
#include <vector>

#include "capi_fixture.h"

namespace cactus::testing {
namespace {

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

std::vector<float> embed(cactus_model_t model, const char* text, bool normalize = true) {
    std::vector<float> v(4096);
    size_t dim = 0;
    const int rc = cactus_embed(model, text, v.data(), v.size() * sizeof(float), &dim, normalize);
    EXPECT_GT(rc, 0) << cactus_get_last_error();
    EXPECT_EQ(static_cast<size_t>(rc), dim);
    v.resize(rc > 0 ? static_cast<size_t>(rc) : 0);
    return v;
}

TEST(CapiEmbed, DecoderMeanPoolIsUnitAndSemantic) {
    cactus_model_t model = shared_model("smollm2-135m");
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    const std::vector<float> cat = embed(model, "The cat sat on the mat.");
    ASSERT_EQ(cat.size(), 576u);  // SmolLM2-135M's width
    EXPECT_NEAR(dot(cat, cat), 1.0, 1e-5);
    const std::vector<float> raw = embed(model, "The cat sat on the mat.", /*normalize=*/false);
    const double norm = std::sqrt(dot(raw, raw));
    EXPECT_GT(std::fabs(norm - 1.0), 1e-3);  // unnormalised really is the raw mean
    for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(raw[i] / norm, cat[i], 1e-5);
    const std::vector<float> again = embed(model, "The cat sat on the mat.");
    EXPECT_EQ(again, cat);  // no state leaks between calls
}

TEST(CapiEmbed, ReturnCodes) {
    cactus_model_t model = shared_model("smollm2-135m");
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    float small[8];
    size_t dim = 0;
    EXPECT_EQ(cactus_embed(model, "hello", small, sizeof small, &dim, true), CACTUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(dim, 576u);  // still set, so the caller can allocate
    EXPECT_NE(std::string(cactus_get_last_error()).find("bytes"), std::string::npos);
    EXPECT_EQ(cactus_embed(model, "", small, sizeof small, &dim, true), CACTUS_ERROR);
    EXPECT_EQ(cactus_embed(model, nullptr, small, sizeof small, &dim, true), CACTUS_ERROR);
    EXPECT_EQ(cactus_embed(model, "hello", small, sizeof small, nullptr, true), CACTUS_ERROR);
    EXPECT_EQ(cactus_embed(nullptr, "hello", small, sizeof small, &dim, true), CACTUS_ERROR);
    EXPECT_EQ(cactus_image_embed(model, "/nonexistent.png", small, sizeof small, &dim), CACTUS_ERROR);
    EXPECT_NE(std::string(cactus_get_last_error()).find("vision"), std::string::npos);
    EXPECT_EQ(cactus_audio_embed(model, "/nonexistent.wav", small, sizeof small, &dim), CACTUS_ERROR);
    EXPECT_NE(std::string(cactus_get_last_error()).find("audio encoder"), std::string::npos);
}

TEST(CapiEmbed, ChatStillWorksAfterEmbedding) {
    cactus_model_t model = shared_model("smollm2-135m");
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    std::string first, second;
    ASSERT_GT(normal_completion(model, &first), 0) << cactus_get_last_error();
    embed(model, "An embedding between two turns forgets the cached conversation.");
    ASSERT_GT(normal_completion(model, &second), 0) << cactus_get_last_error();
    const auto response = [](const std::string& r) { return r.substr(r.find("\"response\"")); };
    EXPECT_EQ(response(first).substr(0, 40), response(second).substr(0, 40));  // greedy: same answer
}

}  // namespace
}  // namespace cactus::testing
