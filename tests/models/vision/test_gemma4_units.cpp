// Gemma 4 preprocessing: the processor's target sizes (get_aspect_ratio_preserving_size, values from
// transformers' function), the budgets it accepts, extreme aspect ratios (bounded allocations) and
// the rescaled planes.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/vision/preprocess.h"

namespace {

struct SizeCase {
    size_t w, h, tokens, want_w, want_h;
};

TEST(Gemma4Units, ImageSizeEqualsTheProcessors) {
    const SizeCase cases[] = {
        {217, 139, 280, 960, 624},    {300, 97, 70, 672, 192},    {480, 336, 70, 480, 336}, {768, 768, 280, 768, 768},
        {1, 16384, 280, 48, 13440},   {16384, 2, 280, 13440, 48}, {5000, 3, 70, 3360, 48},  {1, 1, 1120, 1584, 1584},
        {4000, 3000, 560, 1296, 960}, {97, 389, 140, 240, 1104},  {100, 7, 70, 1488, 96},
    };
    for (const SizeCase& c : cases) {
        const auto got = cactus::gemma4_image_size(c.w, c.h, c.tokens);
        EXPECT_EQ(got, std::make_pair(c.want_w, c.want_h)) << c.w << "x" << c.h << " at " << c.tokens;
    }
}

TEST(Gemma4Units, OnlyTheProcessorsBudgets) {
    EXPECT_THROW(cactus::gemma4_image_size(640, 480, 256), cactus::Error);
    EXPECT_THROW(cactus::gemma4_image_size(640, 480, 0), cactus::Error);
    EXPECT_THROW(cactus::gemma4_image_size(0, 480, 280), cactus::Error);
}

TEST(Gemma4Units, ExtremeAspectResizesWithinTheBudget) {
    cactus::Image strip;
    strip.width = 16384;
    strip.height = 2;
    strip.rgb.assign(strip.width * strip.height * 3, 200);
    const cactus::Image out = cactus::gemma4_image(strip, 280);
    EXPECT_EQ(out.width, 13440u);
    EXPECT_EQ(out.height, 48u);
    EXPECT_EQ(out.rgb.size(), size_t(13440) * 48 * 3);
    EXPECT_EQ(out.rgb[0], 200);  // a flat image stays flat
}

TEST(Gemma4Units, PlanesAreRescaledChannelPlanes) {
    cactus::Image img;
    img.width = 2;
    img.height = 1;
    img.rgb = {0, 51, 255, 10, 20, 30};
    const std::vector<float> p = cactus::gemma4_planes(img);
    const float s = float(1.0 / 255.0);
    const std::vector<float> want = {0.0f, 10 * s, 51 * s, 20 * s, 255 * s, 30 * s};
    EXPECT_EQ(p, want);
}

}  // namespace
