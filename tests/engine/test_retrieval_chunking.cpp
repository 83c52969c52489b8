// Cactus's chunking recipe (src/engine/retrieval/chunking.h) with one token per word.
#include <gtest/gtest.h>

#include "core/error.h"

#include "engine/retrieval/chunking.h"
#include "retrieval_fixtures.h"

namespace cactus {
namespace {

std::string words(const std::string& stem, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? " " : "") + stem + std::to_string(i);
    return s;
}

CorpusEmbedder embedder() { return test::fake_embedder(std::make_shared<size_t>(0)); }

TEST(RetrievalChunking, ParagraphsSplitAtBlankLinesAndHeadings) {
    std::string text = "one\ntwo\n\n\n  \nthree\n# Title\nbody line\n## Sub\n\nlast  \n";
    std::vector<std::string> p = split_paragraphs(text);
    ASSERT_EQ(p.size(), 5u);
    EXPECT_EQ(p[0], "one\ntwo");
    EXPECT_EQ(p[1], "three");
    EXPECT_EQ(p[2], "# Title\nbody line");
    EXPECT_EQ(p[3], "## Sub");
    EXPECT_EQ(p[4], "last");
    EXPECT_TRUE(split_paragraphs("\n \n\t\n").empty());
}

TEST(RetrievalChunking, ParagraphsPackUpTo128Tokens) {
    std::string text = words("a", 50) + "\n\n" + words("b", 50) + "\n\n" + words("c", 50);
    std::vector<Chunk> chunks = chunk_text(text, "n.md", embedder(), {});
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].content, words("a", 50) + "\n" + words("b", 50));
    EXPECT_EQ(chunks[1].content, words("c", 50));
    EXPECT_EQ(chunks[0].source, "n.md");
    EXPECT_EQ(chunks[0].ordinal, 0u);
    EXPECT_EQ(chunks[1].ordinal, 1u);
}

TEST(RetrievalChunking, LongParagraphCutIntoOverlappingWindows) {
    std::string para = words("w", 300);
    std::vector<Chunk> chunks = chunk_text(words("p", 30) + "\n\n" + para, "n.txt", embedder(), {});
    // The short paragraph before it is flushed alone; windows start at words 0, 96 and 192.
    ASSERT_EQ(chunks.size(), 4u);
    EXPECT_EQ(chunks[0].content, words("p", 30));
    auto range = [](size_t from, size_t to) {
        std::string s;
        for (size_t i = from; i < to; ++i) s += (i > from ? " w" : "w") + std::to_string(i);
        return s;
    };
    EXPECT_EQ(chunks[1].content, range(0, 128));
    EXPECT_EQ(chunks[2].content, range(96, 224));
    EXPECT_EQ(chunks[3].content, range(192, 300));
}

TEST(RetrievalChunking, TinyLastChunkJoinsThePreviousOne) {
    std::string text = words("a", 120) + "\n\n" + words("b", 10);
    std::vector<Chunk> chunks = chunk_text(text, "n.txt", embedder(), {});
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(test::count_words(chunks[0].content), 130u);  // may exceed 128, as Cactus's does
    // 24 tokens is not tiny; a file of one tiny chunk keeps it.
    EXPECT_EQ(chunk_text(words("a", 120) + "\n\n" + words("b", 24), "n.txt", embedder(), {}).size(), 2u);
    std::vector<Chunk> one = chunk_text("just a note", "n.txt", embedder(), {});
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].content, "just a note");
    EXPECT_TRUE(chunk_text("", "n.txt", embedder(), {}).empty());
}

TEST(RetrievalChunking, UsesTheEmbeddersSplitterWhenGiven) {
    CorpusEmbedder e = embedder();
    size_t seen_max = 0, seen_overlap = 0;
    e.split_tokens = [&](const std::string&, size_t max_tokens, size_t overlap) {
        seen_max = max_tokens;
        seen_overlap = overlap;
        return std::vector<std::string>{"first window", "second window"};
    };
    std::vector<Chunk> chunks = chunk_text(words("w", 200), "n.txt", e, {});
    EXPECT_EQ(seen_max, 128u);
    EXPECT_EQ(seen_overlap, 32u);
    ASSERT_EQ(chunks.size(), 1u);  // the second window is tiny and joins the first
    EXPECT_EQ(chunks[0].content, "first window\nsecond window");
}

TEST(RetrievalChunking, SplitWordsAlwaysAdvances) {
    auto count = [](const std::string& w) { return w.size(); };  // a token per character
    std::vector<std::string> w = split_words("aa bb cc dd", 4, 2, count);
    EXPECT_EQ(w, (std::vector<std::string>{"aa bb", "bb cc", "cc dd"}));
    // A word longer than a window is a window by itself, and the next window starts after it.
    w = split_words("aaaaaaaaaa bb cc", 4, 2, count);
    EXPECT_EQ(w, (std::vector<std::string>{"aaaaaaaaaa", "bb cc"}));
    EXPECT_THROW(split_words("a b", 4, 4, count), Error);
}

}  // namespace
}  // namespace cactus
