// CorpusIndex end to end with a fake embedder: results, the stored index and its reuse, damaged
// index files, odd folders (src/engine/retrieval/corpus_index.h, index_store.h).
#include <gtest/gtest.h>

#include "core/error.h"

#include <dirent.h>

#include <algorithm>

#include "engine/retrieval/corpus_index.h"
#include "engine/retrieval/index_store.h"
#include "retrieval_fixtures.h"

namespace cactus {
namespace {

using test::TempCorpus;

std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    while (dirent* e = d ? readdir(d) : nullptr) {
        if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    if (d) closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

struct Fixture {
    TempCorpus dir;
    std::shared_ptr<size_t> calls = std::make_shared<size_t>(0);
    CorpusEmbedder embedder = test::fake_embedder(calls);
    CorpusOptions options;

    Fixture() {
        options.index_root = dir.index_root();
        dir.write("cooking.md", "# Pasta\nBoil water, add salt and the pasta.\n\n# Bread\nFlour, water, yeast.");
        dir.write("garden.txt", "Tomatoes need sun and water every day.\n\nRoses are pruned in March.");
        dir.write("tokyo.txt", "東京タワーは赤い。");
        dir.write("ignored.pdf", "not a note");
    }
    std::unique_ptr<CorpusIndex> open() { return CorpusIndex::open(dir.corpus(), embedder, options); }
};

TEST(RetrievalIndex, QueriesEveryModeAndFormatsResults) {
    Fixture fx;
    auto index = fx.open();
    ASSERT_EQ(index->size(), 3u);  // each file's paragraphs pack into one chunk
    EXPECT_FALSE(index->stats().from_cache);
    EXPECT_EQ(index->stats().files, 3u);
    for (RankMode mode : {RankMode::VECTOR, RankMode::BM25, RankMode::HYBRID}) {
        std::vector<RetrievedChunk> r = index->query("when are roses pruned", 2, mode);
        ASSERT_FALSE(r.empty()) << rank_mode_name(mode);
        EXPECT_EQ(r[0].source, "garden.txt") << rank_mode_name(mode);
        EXPECT_LE(r.size(), 2u);
    }
    std::vector<RetrievedChunk> tokyo = index->query("東京", 1, RankMode::BM25);
    ASSERT_EQ(tokyo.size(), 1u);
    EXPECT_EQ(tokyo[0].source, "tokyo.txt");
    EXPECT_EQ(index->query("salt", 0, RankMode::HYBRID).size(), 3u);  // top_k 0: Cactus's 5, of 3 chunks
    EXPECT_THROW(index->query("  \n", 3), Error);

    std::vector<RetrievedChunk> two = {{0, 0.0161, "a.md", "alpha"}, {1, 0.5, "b.txt", "beta \"q\""}};
    EXPECT_EQ(rag_results_json(two),
              "{\"chunks\":[{\"score\":0.0161,\"source\":\"a.md\",\"content\":\"alpha\"},"
              "{\"score\":0.5,\"source\":\"b.txt\",\"content\":\"beta \\\"q\\\"\"}]}");
    EXPECT_EQ(rag_results_json({}), "{\"chunks\":[]}");
    std::string g = rag_grounding_text(two);
    EXPECT_EQ(g.substr(0, 24), "[Retrieved Context - Use");
    EXPECT_NE(g.find("]\n---\nalpha\n(Source: a.md)\n---\nbeta \"q\"\n(Source: b.txt)\n---\n\n"), std::string::npos);
    EXPECT_EQ(rag_grounding_text({}), "");
}

TEST(RetrievalIndex, StoredOutsideTheCorpusAndReused) {
    Fixture fx;
    auto first = fx.open();
    size_t embedded = *fx.calls;
    EXPECT_EQ(list_dir(fx.dir.corpus()),
              (std::vector<std::string>{"cooking.md", "garden.txt", "ignored.pdf", "tokyo.txt"}));
    EXPECT_EQ(list_dir(first->stats().index_dir), (std::vector<std::string>{"chunks.bin", "manifest.json"}));
    auto second = fx.open();
    EXPECT_TRUE(second->stats().from_cache) << second->stats().rebuild_reason;
    EXPECT_EQ(*fx.calls, embedded);
    ASSERT_EQ(second->size(), first->size());
    for (size_t i = 0; i < first->size(); ++i) {
        EXPECT_EQ(second->chunks()[i].content, first->chunks()[i].content);
        EXPECT_EQ(second->chunks()[i].source, first->chunks()[i].source);
        EXPECT_EQ(second->chunks()[i].ordinal, first->chunks()[i].ordinal);
    }
    auto a = first->query("bread yeast", 3), b = second->query("bread yeast", 3);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].id, b[i].id);
        EXPECT_DOUBLE_EQ(a[i].score, b[i].score);
    }
    fx.options.cache_index = false;
    EXPECT_FALSE(fx.open()->stats().from_cache);
}

TEST(RetrievalIndex, RebuiltWhenTheCorpusOrEmbedderChanges) {
    Fixture fx;
    fx.open();
    auto reopened = [&] { return fx.open()->stats().from_cache; };
    ASSERT_TRUE(reopened());
    fx.dir.write("garden.txt", "Tomatoes need sun and water every day.\n\nRoses are pruned in April.");  // same size
    EXPECT_FALSE(reopened());
    EXPECT_TRUE(reopened());
    fx.dir.write("new.md", "A new note about bicycles.");
    auto index = fx.open();
    EXPECT_FALSE(index->stats().from_cache);
    EXPECT_EQ(index->query("bicycles", 1, RankMode::BM25).at(0).source, "new.md");
    fx.dir.remove("new.md");
    EXPECT_FALSE(reopened());
    EXPECT_TRUE(reopened());
    CorpusEmbedder other = test::fake_embedder(fx.calls, "fake-bow-64-v2");
    auto by_other = CorpusIndex::open(fx.dir.corpus(), other, fx.options);
    EXPECT_FALSE(by_other->stats().from_cache);
    EXPECT_NE(by_other->stats().index_dir, index->stats().index_dir);
    fx.options.chunking.max_tokens = 64;
    EXPECT_FALSE(reopened());
}

TEST(RetrievalIndex, ManifestMatchingNeedsEveryField) {
    IndexManifest a;
    a.corpus = "/c";
    a.embedder_id = "e";
    a.dim = 4;
    a.files = {{"a.txt", 3, 7, "abc"}};
    IndexManifest b = a;
    EXPECT_TRUE(manifest_matches(a, b));
    b.files[0].mtime_ns = 8;
    EXPECT_FALSE(manifest_matches(a, b));
    b = a;
    b.changed_while_reading = {"a.txt"};  // recorded during the build: never reused
    EXPECT_FALSE(manifest_matches(b, a));
    b = a;
    b.dim = 5;
    EXPECT_FALSE(manifest_matches(a, b));
    EXPECT_EQ(manifest_from_json(manifest_to_json(a)).files[0].sha256, "abc");
}

}  // namespace
}  // namespace cactus

namespace cactus {
namespace {

// Vectors that say nothing (the same for every text): the vector ranking is the chunk order, so
// only BM25 can find the one note that names the query's word.
TEST(RetrievalIndex, HybridRecallsWhatVectorsMissUnlessBm25OnlyReranks) {
    TempCorpus dir;
    for (int i = 0; i < 30; ++i) {
        char name[32];
        std::snprintf(name, sizeof(name), "note%02d.txt", i);
        dir.write(name, i == 29 ? "the zeppelin lands at noon" : "an ordinary note number " + std::to_string(i));
    }
    CorpusEmbedder flat = test::fake_embedder(std::make_shared<size_t>(0), "flat", 4);
    flat.embed = [](const std::vector<std::string>& texts) {
        return std::vector<std::vector<float>>(texts.size(), std::vector<float>{1, 0, 0, 0});
    };
    CorpusOptions options;
    options.index_root = dir.index_root();
    auto index = CorpusIndex::open(dir.corpus(), flat, options);
    auto has_zeppelin = [](const std::vector<RetrievedChunk>& r) {
        return std::any_of(r.begin(), r.end(), [](const RetrievedChunk& c) { return c.source == "note29.txt"; });
    };
    EXPECT_FALSE(has_zeppelin(index->query("zeppelin", 5, RankMode::VECTOR)));
    EXPECT_TRUE(has_zeppelin(index->query("zeppelin", 5, RankMode::BM25)));
    EXPECT_TRUE(has_zeppelin(index->query("zeppelin", 5, RankMode::HYBRID)));
    index->set_fusion(FusionOptions::cactus_compatible());  // BM25 sees the 20 vector candidates only
    EXPECT_FALSE(has_zeppelin(index->query("zeppelin", 5, RankMode::HYBRID)));
}

}  // namespace
}  // namespace cactus
