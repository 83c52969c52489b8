// Gemma 3 pieces: the projector's average pool, bidirectional spans in the attention mask and the
// KV cache's query ranges, and how media prefill steps fall around a span.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/host_kv_storage.h"
#include "core/error.h"
#include "engine/media/media_prompt.h"
#include "kv/kv_cache.h"
#include "models/vision/gemma3_projector.h"

namespace {

TEST(Gemma3Units, AveragePoolMeansBlocksRowMajor) {
    // 4 x 4 patches of width 2, value (y * 4 + x, -(y * 4 + x)); 2 x 2 blocks.
    std::vector<float> x;
    for (int y = 0; y < 4; ++y)
        for (int xx = 0; xx < 4; ++xx) {
            x.push_back(float(y * 4 + xx));
            x.push_back(-float(y * 4 + xx));
        }
    std::vector<float> out;
    cactus::average_pool(x.data(), 4, 4, 2, 2, &out);
    // Block (Y, X) holds y in {2Y, 2Y+1}, x in {2X, 2X+1}: mean 8Y + 2X + 2.5.
    const std::vector<float> want = {2.5f, -2.5f, 4.5f, -4.5f, 10.5f, -10.5f, 12.5f, -12.5f};
    EXPECT_EQ(out, want);
    EXPECT_THROW(cactus::average_pool(x.data(), 4, 4, 2, 3, &out), cactus::Error);
}

TEST(Gemma3Units, MaskAheadSeesTheRestOfTheSpan) {
    cactus::AttentionMask m;
    m.q_pos = 10;
    m.ahead = 3;
    EXPECT_TRUE(cactus::attention_row_visible(m, 0));
    EXPECT_TRUE(cactus::attention_row_visible(m, 13));
    EXPECT_FALSE(cactus::attention_row_visible(m, 14));
    m.window = 4;  // past rows still limited by the window, later rows of the span are not
    EXPECT_FALSE(cactus::attention_row_visible(m, 6));
    EXPECT_TRUE(cactus::attention_row_visible(m, 7));
    EXPECT_TRUE(cactus::attention_row_visible(m, 13));
    m.ahead = 0;
    EXPECT_FALSE(cactus::attention_row_visible(m, 11));
}

TEST(Gemma3Units, KvQueryRangeCoversTheSpan) {
    cactus::KvLayerSpec global, ring;
    global.k_width = global.v_width = ring.k_width = ring.v_width = 4;
    ring.window = 16;
    cactus::KvCacheConfig config;
    config.n_ctx = 64;
    config.max_chunk = 16;
    cactus::KvCache cache({global, ring}, config, cactus::make_host_kv_storage);
    ASSERT_EQ(cache.reserve(12), 12u);
    cache.append(12);
    EXPECT_EQ(cache.rows_for_query(0, 3).end, 4u);
    EXPECT_EQ(cache.rows_for_query(0, 3, 9).end, 10u);
    const cactus::AttentionMask g = cache.mask_for(0, 3, 9);
    EXPECT_EQ(g.q_pos, 3);
    EXPECT_EQ(g.ahead, 6u);
    const cactus::AttentionMask r = cache.mask_for(1, 5, 11);
    EXPECT_EQ(r.ahead, 6u);
    EXPECT_EQ(r.window, 16u);
}

cactus::MediaPrompt span_prompt(bool bidirectional) {
    cactus::MediaPrompt p;
    p.n_embd = 1;
    const std::vector<float> rows(5, 0.5f);
    p.push_token(7);
    p.push_rows(rows.data(), 5, bidirectional);  // rows [1, 6)
    p.push_token(8);
    return p;
}

TEST(Gemma3Units, MediaStepNeverSplitsASpan) {
    const cactus::MediaPrompt p = span_prompt(true);
    EXPECT_EQ(p.span_of(3), std::make_pair(size_t(1), size_t(6)));
    EXPECT_EQ(p.span_of(0), std::make_pair(size_t(0), size_t(1)));
    EXPECT_EQ(cactus::media_step(p, 0, 7, 3, 100), 1u);  // ends before the span
    EXPECT_EQ(cactus::media_step(p, 1, 7, 3, 100), 5u);  // the whole span, past the chunk
    EXPECT_EQ(cactus::media_step(p, 1, 7, 8, 100), 6u);  // chunk boundary after the span
    EXPECT_EQ(cactus::media_step(p, 6, 7, 3, 100), 1u);
    try {
        cactus::media_step(p, 1, 7, 3, 4);
        FAIL() << "a span larger than the step must be refused";
    } catch (const cactus::Error& e) {
        EXPECT_NE(std::string(e.what()).find("raise n_batch"), std::string::npos) << e.what();
    }
    // Causal image rows are split like text.
    const cactus::MediaPrompt c = span_prompt(false);
    EXPECT_EQ(cactus::media_step(c, 0, 7, 3, 100), 3u);
    EXPECT_EQ(cactus::media_step(c, 1, 7, 3, 2), 2u);
}

}  // namespace
