// The tokenizer's open-addressing tables: text -> id over a vocabulary, (left, right) -> merge rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/flat_index.h"

namespace cactus {
namespace {

TEST(TextIndex, FindsEveryTextAndNothingElse) {
    std::vector<std::string> texts;
    for (int i = 0; i < 5000; ++i) texts.push_back("t" + std::to_string(i));
    texts.push_back("");
    texts.push_back(std::string("\0x", 2));  // embedded NUL: compared by length, not as a C string
    TextIndex index;
    EXPECT_EQ(index.build(texts), -1);
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(index.find(texts[i]), static_cast<int32_t>(i));
    EXPECT_EQ(index.find("t5000"), -1);
    EXPECT_EQ(index.find(std::string("\0", 1)), -1);
    EXPECT_EQ(TextIndex().find("t1"), -1);  // never built
}

TEST(TextIndex, ReportsTheFirstDuplicate) {
    const std::vector<std::string> texts = {"a", "b", "c", "b", "a"};
    TextIndex index;
    EXPECT_EQ(index.build(texts), 3);
    EXPECT_EQ(index.first_of(3), 1);
}

TEST(PairIndex, KeepsTheFirstRankAndGrowsPastItsReservation) {
    PairIndex index;
    index.reserve(4);
    int32_t rank = 0;
    for (int32_t left = 0; left < 100; ++left) {
        for (int32_t right = 0; right < 100; right += 7) index.insert(left, right, rank++);
    }
    index.insert(3, 7, 999999);  // a later duplicate does not replace the first rank
    rank = 0;
    for (int32_t left = 0; left < 100; ++left) {
        for (int32_t right = 0; right < 100; right += 7) EXPECT_EQ(index.find(left, right), rank++);
    }
    EXPECT_EQ(index.find(1, 2), -1);
    EXPECT_EQ(index.find(7, 3), -1);  // order matters
    EXPECT_EQ(PairIndex().find(0, 0), -1);
    EXPECT_THROW(index.insert(1, 1, -1), Error);
    EXPECT_THROW(index.reserve(10), Error);
}

}  // namespace
}  // namespace cactus
