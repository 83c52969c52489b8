// Damaged and hostile stored indexes are rebuilt, never trusted; odd corpus folders
// (src/engine/retrieval/index_store.h, corpus_scan.h).
#include <gtest/gtest.h>

#include "core/error.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/retrieval/corpus_index.h"
#include "engine/retrieval/index_store.h"
#include "retrieval_fixtures.h"

namespace cactus {
namespace {

using test::TempCorpus;

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Small {
    TempCorpus dir;
    std::shared_ptr<size_t> calls = std::make_shared<size_t>(0);
    CorpusEmbedder embedder = test::fake_embedder(calls, "fake-bow-4", 4);
    CorpusOptions options;
    std::vector<Chunk> expected;

    Small() {
        options.index_root = dir.index_root();
        dir.write("a.txt", "red apples");
        dir.write("b.md", "green pears");
        expected = open()->chunks();
    }
    std::unique_ptr<CorpusIndex> open() { return CorpusIndex::open(dir.corpus(), embedder, options); }
    // Opens after `damage` rewrote one stored file; the index must be rebuilt and correct.
    void expect_rebuilt(const std::string& file, const std::string& damaged, const std::string& what) {
        std::string path = open()->stats().index_dir + "/" + file;
        write_all(path, damaged);
        auto index = open();
        ASSERT_FALSE(index->stats().from_cache) << what;
        ASSERT_EQ(index->size(), expected.size()) << what;
        for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(index->chunks()[i].content, expected[i].content) << what;
        ASSERT_EQ(index->query("apples", 1, RankMode::HYBRID).at(0).source, "a.txt") << what;
    }
};

TEST(RetrievalStore, TruncatedIndexFilesAreRebuilt) {
    Small s;
    std::string dir = s.open()->stats().index_dir;
    for (const char* file : {"chunks.bin", "manifest.json"}) {
        const std::string good = read_all(dir + "/" + file);
        ASSERT_GT(good.size(), 40u);
        for (size_t n = 0; n < good.size(); ++n) {
            s.expect_rebuilt(file, good.substr(0, n), std::string(file) + " cut at " + std::to_string(n));
        }
        EXPECT_TRUE(s.open()->stats().from_cache);
    }
}

TEST(RetrievalStore, FlippedBytesAreRebuilt) {
    Small s;
    std::string dir = s.open()->stats().index_dir;
    for (const char* file : {"chunks.bin", "manifest.json"}) {
        const std::string good = read_all(dir + "/" + file);
        for (size_t i = 0; i < good.size(); i += (std::strcmp(file, "chunks.bin") == 0 ? 1 : 7)) {
            std::string bad = good;
            bad[i] = static_cast<char>(bad[i] ^ 0x5A);
            std::string path = dir + "/" + file;
            write_all(path, bad);
            auto index = s.open();
            ASSERT_EQ(index->size(), s.expected.size()) << file << " byte " << i;
            ASSERT_EQ(index->chunks()[0].content, s.expected[0].content) << file << " byte " << i;
        }
    }
}

TEST(RetrievalStore, HostileChunksFileIsRejectedEvenWithAMatchingManifest) {
    std::vector<Chunk> chunks = {{"a.txt", "hello", 0}};
    std::string good = serialize_chunks(chunks, {1, 0, 0, 0}, 4);
    std::vector<Chunk> out;
    std::vector<float> vecs;
    parse_chunks(good, 4, &out, &vecs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].content, "hello");
    EXPECT_EQ(vecs, (std::vector<float>{1, 0, 0, 0}));
    EXPECT_THROW(parse_chunks(good, 8, &out, &vecs), Error);  // dim mismatch
    auto patched = [&](size_t at, uint64_t value, size_t width) {
        std::string b = good;
        std::memcpy(&b[at], &value, width);
        return b;
    };
    EXPECT_THROW(parse_chunks(patched(0, 0x58, 1), 4, &out, &vecs), Error);                // magic
    EXPECT_THROW(parse_chunks(patched(8, 2, 4), 4, &out, &vecs), Error);                   // version
    EXPECT_THROW(parse_chunks(patched(16, uint64_t(1) << 60, 8), 4, &out, &vecs), Error);  // count
    EXPECT_THROW(parse_chunks(patched(16, 2, 8), 4, &out, &vecs), Error);                  // count + 1
    EXPECT_THROW(parse_chunks(patched(24, 0xFFFFFFF0u, 4), 4, &out, &vecs), Error);        // source length
    EXPECT_THROW(parse_chunks(good + "x", 4, &out, &vecs), Error);                         // trailing bytes
    EXPECT_THROW(parse_chunks(std::string(), 4, &out, &vecs), Error);

    // A manifest that vouches for a hostile chunks.bin (its hash recomputed) is still refused.
    Small s;
    std::string dir = s.open()->stats().index_dir;
    std::string bin = read_all(dir + "/chunks.bin");
    uint64_t huge = uint64_t(1) << 40;
    std::memcpy(&bin[16], &huge, 8);
    std::string manifest = read_all(dir + "/manifest.json");
    size_t at = manifest.find("\"chunks_hash\"");
    ASSERT_NE(at, std::string::npos);
    size_t quote = manifest.find('"', manifest.find(':', at) + 1);
    manifest.replace(quote + 1, 16, fast_hash_hex(bin));
    write_all(dir + "/chunks.bin", bin);
    write_all(dir + "/manifest.json", manifest);
    auto index = s.open();
    EXPECT_FALSE(index->stats().from_cache);
    EXPECT_NE(index->stats().rebuild_reason.find("cannot fit"), std::string::npos) << index->stats().rebuild_reason;
    EXPECT_EQ(index->size(), 2u);
}

TEST(RetrievalStore, EmptyAndMissingFolders) {
    TempCorpus dir;
    auto calls = std::make_shared<size_t>(0);
    CorpusOptions options;
    options.index_root = dir.index_root();
    auto empty = CorpusIndex::open(dir.corpus(), test::fake_embedder(calls), options);
    EXPECT_EQ(empty->size(), 0u);
    EXPECT_TRUE(empty->query("anything", 5).empty());
    EXPECT_TRUE(CorpusIndex::open(dir.corpus(), test::fake_embedder(calls), options)->stats().from_cache);
    dir.write("photo.jpg", "not text");
    mkdir((dir.corpus() + "/folder.txt").c_str(), 0755);  // not a regular file: skipped
    EXPECT_EQ(CorpusIndex::open(dir.corpus(), test::fake_embedder(calls), options)->size(), 0u);
    EXPECT_THROW(CorpusIndex::open(dir.corpus() + "/missing", test::fake_embedder(calls), options), Error);
    dir.write("file.md", "x");
    EXPECT_THROW(CorpusIndex::open(dir.corpus() + "/file.md", test::fake_embedder(calls), options), Error);
}

TEST(RetrievalStore, UnreadableFileIsAnErrorNamingIt) {
    TempCorpus dir;
    auto calls = std::make_shared<size_t>(0);
    CorpusOptions options;
    options.index_root = dir.index_root();
    dir.write("fine.txt", "readable");
    ASSERT_EQ(symlink((dir.corpus() + "/nowhere").c_str(), (dir.corpus() + "/gone.txt").c_str()), 0);
    try {
        CorpusIndex::open(dir.corpus(), test::fake_embedder(calls), options);
        FAIL() << "a dangling link must fail";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gone.txt"), std::string::npos) << e.what();
    }
    unlink((dir.corpus() + "/gone.txt").c_str());
    dir.write("secret.md", "locked");
    chmod((dir.corpus() + "/secret.md").c_str(), 0);
    if (geteuid() != 0) {  // root reads it anyway
        try {
            CorpusIndex::open(dir.corpus(), test::fake_embedder(calls), options);
            FAIL() << "an unreadable file must fail";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("secret.md"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace cactus
