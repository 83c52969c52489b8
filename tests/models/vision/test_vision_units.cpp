// Vision units: idefics3 tiling geometry and prompt layout, resize/crop argument checks,
// normalisation, and the mmproj loader on hostile files (each error names the key or tensor).
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "models/vision/preprocess.h"
#include "models/vision/vision_encoder.h"

namespace {

cactus::Image solid(size_t w, size_t h, uint8_t v) {
    cactus::Image img;
    img.width = w;
    img.height = h;
    img.rgb.assign(w * h * 3, v);
    return img;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const cactus::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(VisionPreprocess, Idefics3TileGeometry) {
    // 640x480 -> longest edge 1024: 1024x768 -> stretched to 1024x1024 -> 2x2 tiles.
    cactus::TiledImage t = cactus::idefics3_tiles(solid(640, 480, 9), 512, 1024);
    EXPECT_EQ(t.grid_x, 2u);
    EXPECT_EQ(t.grid_y, 2u);
    ASSERT_EQ(t.tiles.size(), 4u);
    EXPECT_EQ(t.overview.width, 512u);
    EXPECT_EQ(t.tiles[3].height, 512u);
    EXPECT_EQ(t.tiles[0].rgb[0], 9);  // a flat image stays flat through Lanczos
    // 300x1000 portrait: width int(1024 * 0.3) = 307 -> 308 (even) -> 1 x 2 tiles.
    t = cactus::idefics3_tiles(solid(300, 1000, 1), 512, 1024);
    EXPECT_EQ(t.grid_x, 1u);
    EXPECT_EQ(t.grid_y, 2u);
    // One tile: no split, the global image alone (transformers).
    t = cactus::idefics3_tiles(solid(100, 50, 1), 512, 512);
    EXPECT_EQ(t.grid_x, 0u);
    EXPECT_TRUE(t.tiles.empty());
}

TEST(VisionPreprocess, Idefics3Layout) {
    const std::vector<cactus::LayoutPiece> l = cactus::idefics3_layout(2, 1);
    ASSERT_EQ(l.size(), 7u);
    EXPECT_EQ(l[0].text, "<fake_token_around_image><row_1_col_1>");
    EXPECT_EQ(l[1].part, 1);
    EXPECT_EQ(l[2].text, "<fake_token_around_image><row_1_col_2>");
    EXPECT_EQ(l[3].part, 2);
    EXPECT_EQ(l[4].text, "\n\n<fake_token_around_image><global-img>");  // no "\n" after the last row
    EXPECT_EQ(l[5].part, 0);
    EXPECT_EQ(l[6].text, "<fake_token_around_image>");
    const std::vector<cactus::LayoutPiece> single = cactus::idefics3_layout(0, 0);
    ASSERT_EQ(single.size(), 3u);
    EXPECT_EQ(single[0].text, "<fake_token_around_image><global-img>");
    const std::vector<cactus::LayoutPiece> rows = cactus::idefics3_layout(1, 3);
    EXPECT_EQ(rows[2].text, "\n");
    EXPECT_EQ(rows[5].text, "\n");
    EXPECT_EQ(rows[6].text, "<fake_token_around_image><row_3_col_1>");
    EXPECT_EQ(rows[7].part, 3);
}

TEST(VisionPreprocess, ArgumentChecks) {
    const cactus::Image img = solid(4, 3, 0);
    EXPECT_NE(error_of([&] { cactus::resize_image(img, 0, 5, cactus::ResizeFilter::BILINEAR); }).find("out of range"),
              std::string::npos);
    EXPECT_NE(error_of([&] { cactus::crop_image(img, 2, 0, 3, 1); }).find("outside a 4x3 image"), std::string::npos);
    EXPECT_EQ(cactus::resize_image(img, 4, 3, cactus::ResizeFilter::LANCZOS).rgb, img.rgb);
}

TEST(VisionPreprocess, NormalizePlanes) {
    cactus::Image img = solid(2, 1, 0);
    img.rgb = {255, 0, 51, 0, 255, 102};
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.25f, 1.0f};
    const std::vector<float> p = cactus::normalize_planes(img, mean, std);
    ASSERT_EQ(p.size(), 6u);
    EXPECT_FLOAT_EQ(p[0], 1.0f);   // R of pixel 0
    EXPECT_FLOAT_EQ(p[1], -1.0f);  // R of pixel 1
    EXPECT_FLOAT_EQ(p[2], -2.0f);  // G of pixel 0: (0 - 0.5) / 0.25
    EXPECT_FLOAT_EQ(p[5], 0.4f - 0.5f);
}

namespace {

// A tiny idefics3 mmproj: 16-px images, 4-px patches, width 8, 1 layer, shuffle 2, projection 6.
struct MmprojSpec {
    std::string projector = "idefics3";
    bool vision = true;
    bool drop_ln1 = false;
    uint64_t patch_side = 4;
};

std::unique_ptr<cactus::GgufFile> tiny_mmproj(const MmprojSpec& spec, std::vector<uint8_t>* bytes) {
    cactus::GgufWriter w;
    w.add_string("general.architecture", "clip");
    w.add_bool("clip.has_vision_encoder", spec.vision);
    w.add_string("clip.projector_type", spec.projector);
    w.add_u32("clip.vision.image_size", 16);
    w.add_u32("clip.vision.patch_size", 4);
    w.add_u32("clip.vision.embedding_length", 8);
    w.add_u32("clip.vision.feed_forward_length", 12);
    w.add_u32("clip.vision.block_count", 1);
    w.add_u32("clip.vision.attention.head_count", 2);
    w.add_u32("clip.vision.projection_dim", 6);
    w.add_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
    w.add_float_array("clip.vision.image_mean", cactus::GgufType::F32, {0.5, 0.5, 0.5});
    w.add_float_array("clip.vision.image_std", cactus::GgufType::F32, {0.5, 0.5, 0.5});
    w.add_u32("clip.vision.projector.scale_factor", 2);
    w.add_u32("clip.vision.preproc_image_size", 32);
    w.add_bool("clip.use_gelu", true);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    auto t = [&](const std::string& name, std::vector<uint64_t> dims) {
        size_t n = 1;
        for (uint64_t d : dims) n *= d;
        std::vector<float> v(n);
        for (float& x : v) x = nd(rng);
        w.add_tensor(name, cactus::DType::F32, dims, v.data(), n * sizeof(float));
    };
    t("v.patch_embd.weight", {spec.patch_side, 4, 3, 8});
    t("v.patch_embd.bias", {8});
    t("v.position_embd.weight", {8, 16});
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
        t(std::string("v.blk.0.") + n + ".weight", {8, 8});
        t(std::string("v.blk.0.") + n + ".bias", {8});
    }
    for (const char* n : {"ln1", "ln2"}) {
        if (spec.drop_ln1 && std::string(n) == "ln1") continue;
        t(std::string("v.blk.0.") + n + ".weight", {8});
        t(std::string("v.blk.0.") + n + ".bias", {8});
    }
    t("v.blk.0.ffn_up.weight", {8, 12});
    t("v.blk.0.ffn_up.bias", {12});
    t("v.blk.0.ffn_down.weight", {12, 8});
    t("v.blk.0.ffn_down.bias", {8});
    t("v.post_ln.weight", {8});
    t("v.post_ln.bias", {8});
    t("mm.model.fc.weight", {32, 6});
    *bytes = w.to_bytes();
    return cactus::GgufFile::from_memory(bytes->data(), bytes->size());
}

std::string load_error(const MmprojSpec& spec) {
    std::vector<uint8_t> bytes;
    auto f = tiny_mmproj(spec, &bytes);
    return error_of([&] { cactus::VisionEncoder enc(*f, cactus::BackendOptions()); });
}

}  // namespace

TEST(VisionEncoder, HostileMmproj) {
    MmprojSpec no_vision;
    no_vision.vision = false;
    EXPECT_NE(load_error(no_vision).find("no vision encoder"), std::string::npos);
    MmprojSpec gemma;
    gemma.projector = "some_future_projector";
    EXPECT_NE(load_error(gemma).find("'some_future_projector' is not supported"), std::string::npos);
    MmprojSpec missing;
    missing.drop_ln1 = true;
    EXPECT_NE(load_error(missing).find("v.blk.0.ln1.weight"), std::string::npos);
    MmprojSpec bad_patch;
    bad_patch.patch_side = 5;
    EXPECT_NE(load_error(bad_patch).find("v.patch_embd.weight"), std::string::npos);
}

TEST(VisionEncoder, TinyEncodeShapesAndInputChecks) {
    std::vector<uint8_t> bytes;
    auto f = tiny_mmproj(MmprojSpec(), &bytes);
    cactus::VisionEncoder enc(*f, cactus::BackendOptions());
    cactus::EncoderInput in;
    in.width = in.height = 16;
    in.planes.assign(3 * 16 * 16, 0.25f);
    EXPECT_EQ(enc.tokens(in), 4u);  // (16 / 4 / 2)^2
    std::vector<float> a, b;
    enc.encode(in, &a);
    ASSERT_EQ(a.size(), 4u * 6u);
    enc.encode(in, &b);
    EXPECT_EQ(a, b);  // no state between images
    in.planes[5] = 3.0f;
    enc.encode(in, &b);
    EXPECT_NE(a, b);
    in.width = 8;
    EXPECT_NE(error_of([&] { enc.encode(in, &b); }).find("the encoder takes 16x16"), std::string::npos);
}
