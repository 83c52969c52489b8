#include <gtest/gtest.h>

#include "engine/text_stream.h"

using cactus::TextStream;

TEST(TextStream, PassesTextThroughWithoutStops) {
    TextStream s({}, false);
    EXPECT_EQ(s.push("Hello"), "Hello");
    EXPECT_EQ(s.push(" world"), " world");
    EXPECT_EQ(s.finish(), "");
    EXPECT_EQ(s.text(), "Hello world");
}

TEST(TextStream, StopsAtSequenceSplitAcrossPieces) {
    TextStream s({"</end>"}, false);
    EXPECT_EQ(s.push("abc</"), "abc");  // "</" could start the stop sequence
    EXPECT_EQ(s.push("en"), "");
    EXPECT_EQ(s.push("d>tail"), "");
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(s.text(), "abc");
    EXPECT_EQ(s.push("more"), "");
}

TEST(TextStream, ReleasesHeldTextWhenItDiverges) {
    TextStream s({"STOP"}, false);
    EXPECT_EQ(s.push("xST"), "x");
    EXPECT_EQ(s.push("AY"), "STAY");
    EXPECT_FALSE(s.stopped());
    EXPECT_EQ(s.matched_stop(), "");
}

TEST(TextStream, IncludeStopKeepsTheSequence) {
    TextStream s({"\n\n"}, true);
    EXPECT_EQ(s.push("line\n\nnext"), "line\n\n");
    EXPECT_TRUE(s.stopped());
}

TEST(TextStream, EarliestOfSeveralStopsWins) {
    TextStream s({"world", "lo"}, false);
    EXPECT_EQ(s.push("hello world"), "hel");
    EXPECT_EQ(s.matched_stop(), "lo");  // Anthropic's stop_sequence names it
}

TEST(TextStream, FinishFlushesHeldPrefix) {
    TextStream s({"abc"}, false);
    EXPECT_EQ(s.push("xab"), "x");
    EXPECT_EQ(s.finish(), "ab");
    EXPECT_EQ(s.text(), "xab");
}
