// BM25 against hand-computed scores, Unicode terms, top-k, the vector store and RRF
// (src/engine/retrieval/bm25.h, vector_store.h, fusion.h).
#include <gtest/gtest.h>

#include "core/error.h"

#include <cmath>

#include "engine/retrieval/bm25.h"
#include "engine/retrieval/fusion.h"
#include "engine/retrieval/vector_store.h"

namespace cactus {
namespace {

// Lengths 3, 2, 4 (average 3); N = 3.
const std::vector<std::string> kDocs = {"Apple banana apple", "banana, cherry!", "cherry date egg fig"};

TEST(RetrievalBm25, TermsAreUnicodeAware) {
    using V = std::vector<std::string>;
    EXPECT_EQ(bm25_terms("Hello, WORLD-42 it's"), (V{"hello", "world", "42", "it", "s"}));
    EXPECT_EQ(bm25_terms("Café Zürich naïve"), (V{"café", "zürich", "naïve"}));
    EXPECT_EQ(bm25_terms("Москва и Київ"), (V{"Москва", "и", "Київ"}));
    EXPECT_EQ(bm25_terms("東京タワーで"), (V{"東", "京", "タ", "ワ", "ー", "で"}));
    EXPECT_EQ(bm25_terms("a\u2014b\u3002c d\xff"
                         "e"),
              (V{"a", "b", "c", "d", "e"}));  // em dash, 。, bad byte
    EXPECT_EQ(bm25_terms("abc東京def"), (V{"abc", "東", "京", "def"}));
    EXPECT_TRUE(bm25_terms(" ,.;\n").empty());
}

TEST(RetrievalBm25, ScoresMatchHandComputation) {
    Bm25Index index(kDocs);
    EXPECT_EQ(index.size(), 3u);
    // apple: df 1, idf = ln(2.5/1.5 + 1) = ln(8/3); doc 0: tf 2, dl = avg, 2 * 2.5 / (2 + 1.5).
    std::vector<ScoredId> r = index.query("APPLE", 10);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].id, 0u);
    EXPECT_NEAR(r[0].score, std::log(8.0 / 3.0) * 5.0 / 3.5, 1e-5);
    // banana, cherry: df 2 each, idf = ln(1.6). doc 1 (dl 2): 2 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2/3));
    // doc 0 (dl 3): 2.5 / 2.5; doc 2 (dl 4): 2.5 / (1 + 1.5 * (0.25 + 0.75 * 4/3)).
    r = index.query("banana cherry banana", 10);  // a repeated query term counts once
    ASSERT_EQ(r.size(), 3u);
    double idf = std::log(1.6);
    EXPECT_EQ(r[0].id, 1u);
    EXPECT_NEAR(r[0].score, 2 * idf * 2.5 / 2.125, 1e-5);
    EXPECT_EQ(r[1].id, 0u);
    EXPECT_NEAR(r[1].score, idf * 1.0, 1e-5);
    EXPECT_EQ(r[2].id, 2u);
    EXPECT_NEAR(r[2].score, idf * 2.5 / 2.875, 1e-5);
    EXPECT_EQ(index.query("banana cherry", 1).size(), 1u);
    EXPECT_TRUE(index.query("zebra", 10).empty());
}

TEST(RetrievalBm25, CandidateOnlyScoringUsesTheSubsetStatistics) {
    Bm25Index index(kDocs);
    // cherry over docs {1, 2}: N 2, df 2, idf = ln(1.2), avgdl 3.
    std::vector<uint32_t> only = {2, 1, 1, 99};  // duplicates and unknown ids are ignored
    std::vector<ScoredId> r = index.query("cherry apple", 10, &only);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].id, 1u);
    EXPECT_NEAR(r[0].score, std::log(1.2) * 2.5 / 2.125, 1e-5);
    EXPECT_EQ(r[1].id, 2u);
    EXPECT_NEAR(r[1].score, std::log(1.2) * 2.5 / 2.875, 1e-5);
}

TEST(RetrievalBm25, TopKKeepsTheBestInOrder) {
    TopK top(3);
    const float scores[] = {0.1f, 0.9f, 0.5f, 0.9f, 0.7f, -1.0f};
    for (uint32_t i = 0; i < 6; ++i) top.push(i, scores[i]);
    std::vector<ScoredId> r = top.take_sorted();
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].id, 1u);  // ties: the lower id first
    EXPECT_EQ(r[1].id, 3u);
    EXPECT_EQ(r[2].id, 4u);
    TopK none(0);
    none.push(0, 1.0f);
    EXPECT_TRUE(none.take_sorted().empty());
}

TEST(RetrievalVectors, BruteForceTopKByDotProduct) {
    VectorStore store(5);  // odd dim: the tail of the dot loop
    const float rows[3][5] = {{1, 0, 0, 0, 0}, {0.6f, 0.8f, 0, 0, 0}, {0, 0, 0, 0, 1}};
    for (const auto& row : rows) store.add(row);
    EXPECT_EQ(store.size(), 3u);
    const float q[5] = {0.8f, 0.6f, 0, 0, 0};
    std::vector<ScoredId> r = store.query(q, 2);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].id, 1u);
    EXPECT_NEAR(r[0].score, 0.96f, 1e-6);
    EXPECT_EQ(r[1].id, 0u);
    EXPECT_NEAR(r[1].score, 0.8f, 1e-6);
    EXPECT_THROW(store.assign(std::vector<float>(7)), Error);
}

TEST(RetrievalVectors, ThreadedScanEqualsOneThread) {
    const size_t dim = 7, n = 1001;
    VectorStore store(dim);
    uint32_t state = 12345;
    auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 24) / 256.0f - 0.5f;
    };
    std::vector<float> row(dim);
    for (size_t r = 0; r < n; ++r) {
        for (float& x : row) x = next();
        if (r % 100 == 3) row.assign(dim, 0.25f);  // equal scores: ties resolved by id
        store.add(row.data());
    }
    std::vector<float> q(dim, 0.5f);
    std::vector<ScoredId> one = store.query(q.data(), 20, 1);
    for (size_t threads : {2, 3, 8, 2000}) {
        std::vector<ScoredId> many = store.query(q.data(), 20, threads);
        ASSERT_EQ(many.size(), one.size());
        for (size_t i = 0; i < one.size(); ++i) {
            EXPECT_EQ(many[i].id, one[i].id) << threads << " threads, rank " << i;
            EXPECT_EQ(many[i].score, one[i].score);
        }
    }
}

TEST(RetrievalFusion, ReciprocalRankFusion) {
    std::vector<ScoredId> vec = {{5, 0.9f}, {3, 0.8f}, {1, 0.7f}};
    std::vector<ScoredId> bm = {{1, 9.0f}, {7, 3.0f}};
    FusionOptions f;
    f.w_vector = 0.5;
    f.w_bm25 = 0.5;
    std::vector<FusedId> r = rrf_fuse(vec, bm, f, 10);
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[0].id, 1u);
    EXPECT_DOUBLE_EQ(r[0].score, 0.5 / 63 + 0.5 / 61);
    EXPECT_EQ(r[1].id, 5u);
    EXPECT_DOUBLE_EQ(r[1].score, 0.5 / 61);
    EXPECT_EQ(r[2].id, 3u);  // ties 7 at 0.5/62 and wins on its vector rank
    EXPECT_EQ(r[3].id, 7u);
    // Cactus's weights, only the first candidate of each ranking, top 1.
    f = FusionOptions::cactus_compatible();
    f.candidates = 1;
    r = rrf_fuse(vec, bm, f, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].id, 5u);
    EXPECT_DOUBLE_EQ(r[0].score, 0.8 / 61);
    EXPECT_TRUE(rrf_fuse({}, {}, f, 5).empty());
}

}  // namespace
}  // namespace cactus
