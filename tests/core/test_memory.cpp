#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/memory.h"

// The bandwidth read loop sums every word: whole groups of 8, a ragged tail, and none.
TEST(SumWords, EqualsThePlainSumAtOddLengths) {
    std::vector<uint64_t> words(1027);
    for (size_t i = 0; i < words.size(); ++i) words[i] = i * 2654435761u + 7;
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(1027)}) {
        const uint64_t expected = std::accumulate(words.begin(), words.begin() + n, uint64_t(0));
        EXPECT_EQ(cactus::sum_words(words.data(), n), expected) << n;
    }
}
