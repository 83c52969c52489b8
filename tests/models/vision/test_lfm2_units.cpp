// LFM2-VL pieces: the position grid resize (bilinear, antialiased), pixel unshuffle order, the
// preprocessing plan (smart resize with Python's rounding, tiling decision, grid) and the prompt
// layout. The whole path is compared with libmtmd and transformers in test_vision_lfm2.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/vision/lfm2_projector.h"
#include "models/vision/preprocess.h"

namespace {

TEST(Lfm2Units, PositionGridSameSizeIsUnchanged) {
    std::vector<float> grid(4 * 4 * 3), out;
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = float(i) * 0.25f - 3.0f;
    cactus::resize_position_grid(grid.data(), 4, 3, 4, 4, &out);
    EXPECT_EQ(out, grid);
}

TEST(Lfm2Units, PositionGridUpscaleIsBilinearWithClampedEdges) {
    // One channel, 2 x 2 grid [[0, 1], [2, 3]] -> 4 columns x 2 rows: columns at source x =
    // (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 -> clamped weights (1, 0), (.75, .25), (.25, .75), (0, 1).
    const std::vector<float> grid = {0, 1, 2, 3};
    std::vector<float> out;
    cactus::resize_position_grid(grid.data(), 2, 1, 4, 2, &out);
    const std::vector<float> want = {0, 0.25f, 0.75f, 1, 2, 2.25f, 2.75f, 3};
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6f) << i;
}

TEST(Lfm2Units, PositionGridDownscaleIsAntialiased) {
    // 4 x 4 -> 2 columns x 4 rows: scale 2, support 2, centre of column 0 at 0.5: triangle weights
    // 0.75, 0.75, 0.25, 0 over inputs 0..3 (normalised by 1.75) -- not the two nearest inputs.
    std::vector<float> grid(16);
    for (size_t i = 0; i < 16; ++i) grid[i] = float(i % 4);  // value = column
    std::vector<float> out;
    cactus::resize_position_grid(grid.data(), 4, 1, 2, 4, &out);
    ASSERT_EQ(out.size(), 8u);
    EXPECT_NEAR(out[0], (0.75f * 0 + 0.75f * 1 + 0.25f * 2) / 1.75f, 1e-6f);
    EXPECT_NEAR(out[1], (0.25f * 1 + 0.75f * 2 + 0.75f * 3) / 1.75f, 1e-6f);
    EXPECT_THROW(cactus::resize_position_grid(grid.data(), 4, 1, 0, 4, &out), cactus::Error);
}

TEST(Lfm2Units, PixelUnshuffleConcatenatesBlocksRowMajor) {
    // 4 x 2 patches (gw = 4, gh = 2) of width 1, value y * 4 + x; s = 2 -> 2 tokens of width 4.
    std::vector<float> x(8), out;
    for (size_t i = 0; i < 8; ++i) x[i] = float(i);
    cactus::pixel_unshuffle(x.data(), 4, 2, 1, 2, &out);
    const std::vector<float> want = {0, 1, 4, 5, 2, 3, 6, 7};
    EXPECT_EQ(out, want);
    EXPECT_THROW(cactus::pixel_unshuffle(x.data(), 4, 2, 1, 3, &out), cactus::Error);
}

TEST(Lfm2Units, PlanMatchesTheProcessor) {
    const cactus::Lfm2Config c;
    // 640 x 480: not tiled, 576 x 416 (234 tokens, max branch).
    EXPECT_FALSE(cactus::lfm2_needs_tiles(640, 480, c));
    EXPECT_EQ(cactus::lfm2_smart_size(640, 480, c), (std::pair<size_t, size_t>{576, 416}));
    // 1024 x 80: 80 / 32 = 2.5 rounds to 2 (Python's round), so 1024 x 64; half-up would give 96.
    EXPECT_EQ(cactus::lfm2_smart_size(1024, 80, c), (std::pair<size_t, size_t>{1024, 64}));
    // Tiny images grow to at least 64 tokens.
    EXPECT_EQ(cactus::lfm2_smart_size(33, 17, c), (std::pair<size_t, size_t>{384, 192}));
    // 1024 x 512 is exactly at the limit (not tiled); 1024 x 768 tiles 3 x 2 with a 576 x 416 thumbnail.
    EXPECT_FALSE(cactus::lfm2_needs_tiles(1024, 512, c));
    EXPECT_TRUE(cactus::lfm2_needs_tiles(1024, 768, c));
    EXPECT_EQ(cactus::lfm2_grid(1024, 768, c), (std::pair<size_t, size_t>{3, 2}));
    EXPECT_EQ(cactus::lfm2_smart_size(1024, 768, c), (std::pair<size_t, size_t>{576, 416}));
    // Square: 2 x 2 (1 x 1 is below min_tiles; 3 x 3 only when the image covers half of it).
    EXPECT_EQ(cactus::lfm2_grid(1024, 1024, c), (std::pair<size_t, size_t>{2, 2}));
    EXPECT_EQ(cactus::lfm2_grid(1400, 1400, c), (std::pair<size_t, size_t>{3, 3}));
    EXPECT_THROW(cactus::lfm2_smart_size(0, 10, c), cactus::Error);
    cactus::Lfm2Config bad;
    bad.tile = 500;  // not whole 32-px blocks
    EXPECT_THROW(cactus::lfm2_grid(10, 10, bad), cactus::Error);
}

TEST(Lfm2Units, TilesAndThumbnail) {
    cactus::Image img;
    img.width = 1536;
    img.height = 512;
    img.rgb.assign(img.width * img.height * 3, 0);
    for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t((i * 7) % 251);
    const cactus::TiledImage t = cactus::lfm2_tiles(img, cactus::Lfm2Config());
    ASSERT_EQ(t.grid_x, 3u);
    ASSERT_EQ(t.grid_y, 1u);
    ASSERT_EQ(t.tiles.size(), 3u);
    // The grid has the image's size: the tiles are crops of the original.
    EXPECT_EQ(t.tiles[2].rgb, cactus::crop_image(img, 1024, 0, 512, 512).rgb);
    EXPECT_EQ(t.overview.width, 864u);
    EXPECT_EQ(t.overview.height, 288u);
}

TEST(Lfm2Units, TorchResizeKeepsSizeAndConstants) {
    cactus::Image img;
    img.width = 37;
    img.height = 23;
    img.rgb.assign(img.width * img.height * 3, 200);
    const cactus::Image down = cactus::resize_image_torch(img, 11, 7, cactus::ResizeFilter::BILINEAR);
    const cactus::Image up = cactus::resize_image_torch(img, 80, 45, cactus::ResizeFilter::BILINEAR);
    for (uint8_t v : down.rgb) EXPECT_EQ(v, 200);
    for (uint8_t v : up.rgb) EXPECT_EQ(v, 200);
    EXPECT_EQ(cactus::resize_image_torch(img, 37, 23, cactus::ResizeFilter::BILINEAR).rgb, img.rgb);
}

TEST(Lfm2Units, Layout) {
    std::string single, tiled;
    for (const auto& p : cactus::lfm2_layout(0, 0)) single += p.part < 0 ? p.text : "[" + std::to_string(p.part) + "]";
    for (const auto& p : cactus::lfm2_layout(2, 1)) tiled += p.part < 0 ? p.text : "[" + std::to_string(p.part) + "]";
    EXPECT_EQ(single, "<|image_start|>[0]<|image_end|>");
    EXPECT_EQ(tiled, "<|image_start|><|img_row_1_col_1|>[1]<|img_row_1_col_2|>[2]<|img_thumbnail|>[0]<|image_end|>");
}

}  // namespace
