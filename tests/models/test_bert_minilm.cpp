// all-MiniLM-L6-v2 (`cactus pull all-minilm-l6-v2`, scripts/convert_minilm.py) through BertModel
// against the numpy fp64 oracle (scripts/minilm_oracle.py): 200 golden sentences, their HF
// tokenizers ids and mean-pooled, L2-normalised vectors (tests/models/data/minilm_golden.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_models.h"
#include "core/error.h"
#include "engine/embedding.h"
#include "gguf/gguf.h"
#include "models/bert.h"
#include "models/model.h"

using namespace cactus;

namespace {

struct Golden {
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> ids;
    size_t dim = 0;
    std::vector<float> vecs;  // [n, dim]
};

const Golden& golden() {
    static const Golden g = [] {
        Golden out;
        const std::string prefix = std::string(CACTUS_SOURCE_DIR) + "/tests/models/data/minilm_golden";
        std::ifstream jf(prefix + ".json");
        EXPECT_TRUE(jf.good()) << prefix << ".json";
        const nlohmann::json j = nlohmann::json::parse(jf);
        out.dim = j.at("dim").get<size_t>();
        for (const auto& s : j.at("sentences")) {
            out.texts.push_back(s.at("text").get<std::string>());
            out.ids.push_back(s.at("ids").get<std::vector<int32_t>>());
        }
        out.vecs.resize(out.ids.size() * out.dim);
        std::ifstream bf(prefix + ".bin", std::ios::binary);
        bf.read(reinterpret_cast<char*>(out.vecs.data()), std::streamsize(out.vecs.size() * sizeof(float)));
        EXPECT_EQ(size_t(bf.gcount()), out.vecs.size() * sizeof(float)) << prefix << ".bin";
        return out;
    }();
    return g;
}

// Mean over the rows of hidden [n, dim], then unit L2 length (what sentence-transformers does).
std::vector<double> mean_pool_l2(const std::vector<float>& hidden, size_t dim) {
    const size_t n = hidden.size() / dim;
    std::vector<double> v(dim, 0.0);
    for (size_t t = 0; t < n; ++t)
        for (size_t i = 0; i < dim; ++i) v[i] += hidden[t * dim + i];
    double norm = 0.0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    for (double& x : v) x /= norm;
    return v;
}

double cosine(const std::vector<double>& a, const float* b) {
    double dot = 0.0, nb = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        dot += a[i] * b[i];
        nb += double(b[i]) * b[i];
    }
    return dot / std::sqrt(nb);  // a is unit length
}

class MinilmTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { file_ = GgufFile::open(cactus::testing::test_model_path("all-minilm-l6-v2")); }
    static void TearDownTestSuite() { file_.reset(); }

    static std::unique_ptr<BertModel> load(size_t n_batch = 512, int n_threads = 0) {
        ModelOptions o;
        o.n_batch = n_batch;
        o.n_threads = n_threads;
        return BertModel::load(*file_, o);
    }

    static std::unique_ptr<GgufFile> file_;
};

std::unique_ptr<GgufFile> MinilmTest::file_;

TEST_F(MinilmTest, HparamsAndPooling) {
    auto bert = load();
    const BertHparams& hp = bert->hparams();
    EXPECT_EQ(hp.n_vocab, 30522u);
    EXPECT_EQ(hp.n_embd, 384u);
    EXPECT_EQ(hp.n_head, 12u);
    EXPECT_EQ(hp.n_layer, 6u);
    EXPECT_EQ(hp.n_ff, 1536u);
    EXPECT_EQ(hp.n_positions, 512u);
    EXPECT_EQ(hp.n_token_types, 2u);
    EXPECT_FLOAT_EQ(hp.ln_eps, 1e-12f);
    EXPECT_EQ(bert->pooling(), Pooling::MEAN);
}

// Every golden sentence in one encode call (chunked into forwards of n_batch rows): cosine with the
// oracle >= 0.99999 with F32 weights (>= 0.9995 with F16 ones, general.file_type 1).
TEST_F(MinilmTest, MatchesOracleOnGoldenSentences) {
    const Golden& g = golden();
    ASSERT_EQ(g.ids.size(), 200u);
    auto bert = load();
    ASSERT_EQ(bert->hparams().n_embd, g.dim);
    std::vector<std::vector<float>> hidden;
    const auto t0 = std::chrono::steady_clock::now();
    bert->encode(g.ids, &hidden);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(hidden.size(), g.ids.size());
    const bool f16 = file_->get_uint("general.file_type", 0) == 1;
    const double min_allowed = f16 ? 0.9995 : 0.99999;
    double worst = 1.0;
    size_t worst_i = 0, n_tokens = 0;
    for (size_t i = 0; i < g.ids.size(); ++i) {
        ASSERT_EQ(hidden[i].size(), g.ids[i].size() * g.dim) << i;
        n_tokens += g.ids[i].size();
        const double c = cosine(mean_pool_l2(hidden[i], g.dim), &g.vecs[i * g.dim]);
        EXPECT_GE(c, min_allowed) << "sentence " << i << ": " << g.texts[i];
        if (c < worst) {
            worst = c;
            worst_i = i;
        }
    }
    std::printf(
        "[ minilm   ] %s weights: min cosine vs oracle %.9f (1 - cos = %.2e; sentence %zu, %zu tokens) over %zu "
        "sentences, %zu tokens in %.3f s\n",
        f16 ? "F16" : "F32", worst, 1.0 - worst, worst_i, g.ids[worst_i].size(), g.ids.size(), n_tokens, secs);
}

// Packed sequences attend only to themselves: a batch gives each sequence's hidden states as
// encoding it alone does (up to the summation order of products over more rows).
TEST_F(MinilmTest, BatchedEqualsOneAtATime) {
    const Golden& g = golden();
    std::vector<std::vector<int32_t>> seqs;
    for (size_t i : {0, 20, 31, 47, 66, 120, 197}) seqs.push_back(g.ids[i]);
    auto bert = load();
    std::vector<std::vector<float>> together;
    bert->encode(seqs, &together);
    ASSERT_EQ(together.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
        std::vector<std::vector<float>> alone;
        bert->encode({seqs[i]}, &alone);
        ASSERT_EQ(alone[0].size(), together[i].size());
        float max_diff = 0.0f;
        for (size_t k = 0; k < alone[0].size(); ++k)
            max_diff = std::max(max_diff, std::fabs(alone[0][k] - together[i][k]));
        EXPECT_LT(max_diff, 1e-4f) << "sequence " << i;
    }
}

// A small n_batch splits the sequences into several forwards; one sequence longer than n_batch
// (the 500-token golden) still runs alone in its own forward.
TEST_F(MinilmTest, SmallBatchSplitsForwardsAndTakesLongSequences) {
    const Golden& g = golden();
    size_t longest = 0;
    for (size_t i = 0; i < g.ids.size(); ++i)
        if (g.ids[i].size() > g.ids[longest].size()) longest = i;
    ASSERT_GT(g.ids[longest].size(), 32u);
    std::vector<std::vector<int32_t>> seqs = {g.ids[3], g.ids[longest], g.ids[4], g.ids[5], g.ids[6], g.ids[7]};
    std::vector<size_t> which = {3, longest, 4, 5, 6, 7};
    auto bert = load(/*n_batch=*/32);
    std::vector<std::vector<float>> hidden;
    bert->encode(seqs, &hidden);
    ASSERT_EQ(hidden.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
        const double c = cosine(mean_pool_l2(hidden[i], g.dim), &g.vecs[which[i] * g.dim]);
        EXPECT_GE(c, 0.9995) << "sentence " << which[i];
    }
}

TEST_F(MinilmTest, BadInputThrows) {
    auto bert = load();
    std::vector<std::vector<float>> out;
    const size_t n_vocab = bert->hparams().n_vocab, n_pos = bert->hparams().n_positions;
    EXPECT_THROW(bert->encode({{101, 102}, {}}, &out), Error);                         // empty sequence
    EXPECT_THROW(bert->encode({{101, int32_t(n_vocab), 102}}, &out), Error);           // id past the vocabulary
    EXPECT_THROW(bert->encode({{101, -1, 102}}, &out), Error);                         // negative id
    EXPECT_THROW(bert->encode({std::vector<int32_t>(n_pos + 1, 1000)}, &out), Error);  // too long
    EXPECT_THROW(bert->encode({{101, 102}}, nullptr), Error);                          // no output
    bert->encode({std::vector<int32_t>(n_pos, 1000)}, &out);                           // exactly n_positions is fine
    EXPECT_EQ(out.at(0).size(), n_pos * bert->hparams().n_embd);
    EXPECT_NO_THROW(bert->encode({}, &out));
    EXPECT_TRUE(out.empty());
}

TEST(MinilmLoad, RejectsZeroBatch) {
    auto file = GgufFile::open(cactus::testing::test_model_path("all-minilm-l6-v2"));
    ModelOptions o;
    o.n_batch = 0;
    EXPECT_THROW(BertModel::load(*file, o), Error);
}

// Sentences per second for a batch of 64 typical sentences (the golden ones of 8..32 tokens), at
// 1 and 2 threads; best of 3. Printed, not asserted.
TEST_F(MinilmTest, Throughput) {
    const Golden& g = golden();
    std::vector<std::vector<int32_t>> batch;
    size_t n_tokens = 0;
    for (size_t i = 0; i < g.ids.size() && batch.size() < 64; ++i) {
        if (g.ids[i].size() >= 8 && g.ids[i].size() <= 32) {
            batch.push_back(g.ids[i]);
            n_tokens += g.ids[i].size();
        }
    }
    ASSERT_EQ(batch.size(), 64u);
    for (int threads : {1, 2}) {
        auto bert = load(512, threads);
        std::vector<std::vector<float>> out;
        double best = 1e9;
        for (int rep = 0; rep < 3; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            bert->encode(batch, &out);
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf(
            "[ minilm   ] %d thread%s: 64 sentences (%zu tokens) in %.1f ms = %.0f sentences/s, %.0f tokens/s\n",
            threads, threads == 1 ? "" : "s", n_tokens, best * 1e3, 64 / best, n_tokens / best);
    }
}

}  // namespace
