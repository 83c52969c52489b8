// TextEmbedder end to end on all-MiniLM-L6-v2: text → our WordPiece tokenizer → BertModel → mean
// pooling → L2, against the numpy fp64 oracle's vectors for the 200 golden sentences (the model
// alone is tests/models/test_bert_minilm.cpp; this adds tokenization, batching and pooling).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_models.h"
#include "core/error.h"
#include "engine/embedding.h"

namespace cactus {
namespace {

struct Goldens {
    std::vector<std::string> texts;
    std::vector<float> vectors;  // [n, 384]
};

const Goldens& goldens() {
    static const Goldens g = [] {
        Goldens out;
        const std::string prefix = std::string(CACTUS_SOURCE_DIR) + "/tests/models/data/minilm_golden";
        std::ifstream jf(prefix + ".json");
        EXPECT_TRUE(jf.good()) << prefix << ".json";
        const nlohmann::json j = nlohmann::json::parse(jf);
        for (const auto& s : j.at("sentences")) out.texts.push_back(s.at("text").get<std::string>());
        out.vectors.resize(out.texts.size() * 384);
        std::ifstream bf(prefix + ".bin", std::ios::binary);
        bf.read(reinterpret_cast<char*>(out.vectors.data()), static_cast<std::streamsize>(out.vectors.size() * 4));
        EXPECT_EQ(static_cast<size_t>(bf.gcount()), out.vectors.size() * 4) << prefix << ".bin";
        return out;
    }();
    return g;
}

double cosine(const float* a, const float* b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
    return ab / std::sqrt(aa * bb);
}

class TextEmbedderMinilm : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        embedder_ = TextEmbedder::load_encoder(testing::test_model_path("all-minilm-l6-v2")).release();
    }
    static void TearDownTestSuite() { delete embedder_; }
    static TextEmbedder* embedder_;
};
TextEmbedder* TextEmbedderMinilm::embedder_ = nullptr;

TEST_F(TextEmbedderMinilm, TextsMatchTheOracle) {
    const Goldens& g = goldens();
    ASSERT_EQ(g.texts.size(), 200u);
    const std::vector<Embedding> e = embedder_->embed(g.texts, EmbedOptions());
    ASSERT_EQ(e.size(), g.texts.size());
    double worst = 1.0;
    for (size_t i = 0; i < e.size(); ++i) {
        ASSERT_EQ(e[i].values.size(), 384u);
        const double c = cosine(e[i].values.data(), g.vectors.data() + i * 384, 384);
        EXPECT_GE(c, 0.99999) << i << ": " << g.texts[i];
        worst = std::min(worst, c);
    }
    std::printf("MiniLM text -> vector: min cosine to the fp64 oracle over 200 sentences: 1 - %.2e\n", 1.0 - worst);
}

TEST_F(TextEmbedderMinilm, HenryPairFromCactusTest) {
    const auto e = embedder_->embed({"My name is Henry Ndubuaku", "Your name is Henry Ndubuaku"}, EmbedOptions());
    EXPECT_NEAR(cosine(e[0].values.data(), e[1].values.data(), 384), 0.967014, 1e-5);  // the numpy oracle's value
}

TEST_F(TextEmbedderMinilm, PoolingsAndNormalisation) {
    EmbedOptions none;
    none.pooling = Pooling::NONE;
    const Embedding rows = embedder_->embed({"hello world"}, none).at(0);
    ASSERT_EQ(rows.rows, 4u);  // [CLS] hello world [SEP]
    EmbedOptions cls;
    cls.pooling = Pooling::CLS;
    cls.normalize = false;
    const Embedding first = embedder_->embed({"hello world"}, cls).at(0);
    EXPECT_EQ(std::vector<float>(rows.values.begin(), rows.values.begin() + 384), first.values);
    EmbedOptions last = cls;
    last.pooling = Pooling::LAST;
    const Embedding end = embedder_->embed({"hello world"}, last).at(0);
    EXPECT_EQ(std::vector<float>(rows.values.end() - 384, rows.values.end()), end.values);
    EXPECT_EQ(embedder_->default_pooling(), Pooling::MEAN);  // from 1_Pooling/config.json
}

TEST_F(TextEmbedderMinilm, LongTextsAreCutOrRefused) {
    std::string text;
    for (int i = 0; i < 700; ++i) text += "token" + std::to_string(i % 13) + " ";
    EmbedOptions options;
    const Embedding cut = embedder_->embed({text}, options).at(0);
    EXPECT_EQ(cut.n_tokens, 512u);
    options.truncate = false;
    EXPECT_THROW(embedder_->embed({text}, options), Error);
    EXPECT_THROW(embedder_->embed({""}, EmbedOptions()), Error);
    EXPECT_THROW(embedder_->embed_tokens({{101, 999999, 102}}, EmbedOptions()), Error);
    const Embedding ok = embedder_->embed({"still usable"}, EmbedOptions()).at(0);  // after the errors
    EXPECT_EQ(ok.values.size(), 384u);
}

}  // namespace
}  // namespace cactus
