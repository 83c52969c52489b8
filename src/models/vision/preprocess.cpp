// Pillow's resampling (libImaging/Resample.c, 13.0) restated: for each output pixel a window of input
// pixels with filter weights normalised to sum 1, converted to fixed point with 22 fractional bits
// (round half away from zero), accumulated in int32 from a bias of one half, shifted and clamped.
#include "models/vision/preprocess.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace cactus {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double filter_support(ResizeFilter f) {
    switch (f) {
        case ResizeFilter::BILINEAR:
            return 1.0;
        case ResizeFilter::BICUBIC:
            return 2.0;
        case ResizeFilter::LANCZOS:
            return 3.0;
    }
    return 1.0;
}

double sinc(double v) {
    if (v == 0.0) return 1.0;
    const double pv = v * 3.141592653589793238462643383279502884;
    return std::sin(pv) / pv;
}

double filter_value(ResizeFilter f, double x) {
    if (f == ResizeFilter::LANCZOS) return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
    if (x < 0.0) x = -x;
    if (f == ResizeFilter::BILINEAR) return x < 1.0 ? 1.0 - x : 0.0;
    constexpr double a = -0.5;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// Per output pixel: first input index, count, and ksize fixed-point weights with `precision`
// fractional bits.
struct Kernel {
    size_t ksize = 0;
    int precision = kPrecisionBits;
    std::vector<int> bounds;       // [out, 2]
    std::vector<int32_t> weights;  // [out, ksize]
};

// Pillow: weights normalised to sum 1, then 22 fractional bits. Torch (uint8 antialiased resize,
// aten UpSampleKernel.cpp _compute_index_ranges_int16_weights): the same windows and normalised
// weights, then int16 with the most fractional bits (< 22) for which 2 * max weight stays below 2^15.
Kernel precompute(size_t in_size, size_t out_size, ResizeFilter f, bool torch_int16 = false) {
    const double scale = double(in_size) / double(out_size);
    const double filterscale = std::max(scale, 1.0);
    const double support = filter_support(f) * filterscale;
    Kernel k;
    k.ksize = size_t(std::ceil(support)) * 2 + 1;
    k.bounds.resize(out_size * 2);
    k.weights.assign(out_size * k.ksize, 0);
    std::vector<double> w(out_size * k.ksize, 0.0);
    double w_max = 0.0;
    for (size_t xx = 0; xx < out_size; ++xx) {
        const double center = (double(xx) + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        int xmin = int(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = int(center + support + 0.5);
        if (xmax > int(in_size)) xmax = int(in_size);
        xmax -= xmin;
        double* wx = &w[xx * k.ksize];
        double ww = 0.0;
        for (int x = 0; x < xmax; ++x) {
            wx[x] = filter_value(f, (x + xmin - center + 0.5) * ss);
            ww += wx[x];
        }
        for (int x = 0; x < xmax; ++x) {
            if (ww != 0.0) wx[x] /= ww;
            w_max = std::max(w_max, wx[x]);
        }
        k.bounds[xx * 2] = xmin;
        k.bounds[xx * 2 + 1] = xmax;
    }
    if (torch_int16)
        for (k.precision = 0; k.precision < 22; ++k.precision)
            if (int(0.5 + w_max * double(1 << (k.precision + 1))) >= (1 << 15)) break;
    const double fxp = std::ldexp(1.0, k.precision);
    for (size_t i = 0; i < w.size(); ++i) {
        const double v = w[i] * fxp;
        k.weights[i] =
            torch_int16 ? int32_t(int16_t(v < 0 ? int(v - 0.5) : int(v + 0.5))) : int32_t(v + (v < 0 ? -0.5 : 0.5));
    }
    return k;
}

uint8_t clip8(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : uint8_t(v); }

// [h, in_w, 3] -> [h, out_w, 3]
Image resample_horizontal(const Image& src, size_t out_w, const Kernel& k) {
    Image dst;
    dst.width = out_w;
    dst.height = src.height;
    dst.rgb.resize(out_w * src.height * 3);
    for (size_t y = 0; y < src.height; ++y) {
        const uint8_t* row = src.rgb.data() + y * src.width * 3;
        uint8_t* out = dst.rgb.data() + y * out_w * 3;
        for (size_t xx = 0; xx < out_w; ++xx) {
            const int xmin = k.bounds[xx * 2], xcnt = k.bounds[xx * 2 + 1];
            const int32_t* w = &k.weights[xx * k.ksize];
            int32_t s0 = 1 << (k.precision - 1), s1 = s0, s2 = s0;
            const uint8_t* p = row + size_t(xmin) * 3;
            for (int x = 0; x < xcnt; ++x, p += 3) {
                s0 += p[0] * w[x];
                s1 += p[1] * w[x];
                s2 += p[2] * w[x];
            }
            out[xx * 3] = clip8(s0 >> k.precision);
            out[xx * 3 + 1] = clip8(s1 >> k.precision);
            out[xx * 3 + 2] = clip8(s2 >> k.precision);
        }
    }
    return dst;
}

// [in_h, w, 3] -> [out_h, w, 3]
Image resample_vertical(const Image& src, size_t out_h, const Kernel& k) {
    Image dst;
    dst.width = src.width;
    dst.height = out_h;
    const size_t row_elems = src.width * 3;
    dst.rgb.resize(row_elems * out_h);
    std::vector<int32_t> acc(row_elems);
    for (size_t yy = 0; yy < out_h; ++yy) {
        const int ymin = k.bounds[yy * 2], ycnt = k.bounds[yy * 2 + 1];
        const int32_t* w = &k.weights[yy * k.ksize];
        std::fill(acc.begin(), acc.end(), 1 << (k.precision - 1));
        for (int y = 0; y < ycnt; ++y) {
            const uint8_t* row = src.rgb.data() + size_t(ymin + y) * row_elems;
            for (size_t i = 0; i < row_elems; ++i) acc[i] += row[i] * w[y];
        }
        uint8_t* out = dst.rgb.data() + yy * row_elems;
        for (size_t i = 0; i < row_elems; ++i) out[i] = clip8(acc[i] >> k.precision);
    }
    return dst;
}

}  // namespace

Image resize_image(const Image& src, size_t width, size_t height, ResizeFilter filter) {
    if (width == 0 || height == 0 || width > 65536 || height > 65536 || src.width == 0 || src.height == 0)
        fail("resize_image: %zux%zu to %zux%zu is out of range (1..65536)", src.width, src.height, width, height);
    // Pass order as Pillow 13 (python-pillow PR #9549): the vertical pass runs first when the
    // height shrinks by more than twice as many pixels as the width does (fitted on 300 random
    // size pairs and all three filters, no exception: tests/models/vision). The order matters: the 8-bit
    // intermediate image is rounded and clamped (Lanczos overshoots). llama.cpp's resize_pillow
    // always runs the horizontal pass first (Pillow <= 12), so it differs from transformers with
    // Pillow 13 on such images (docs/VISION.md).
    const bool need_h = width != src.width, need_v = height != src.height;
    const bool vertical_first =
        height < src.height && int64_t(src.height - height) > 2 * (int64_t(src.width) - int64_t(width));
    if (need_h && need_v && vertical_first) {
        const Image tmp = resample_vertical(src, height, precompute(src.height, height, filter));
        return resample_horizontal(tmp, width, precompute(src.width, width, filter));
    }
    Image cur = src;
    if (need_h) cur = resample_horizontal(cur, width, precompute(src.width, width, filter));
    if (need_v) cur = resample_vertical(cur, height, precompute(src.height, height, filter));
    return cur;
}

Image resize_image_torch(const Image& src, size_t width, size_t height, ResizeFilter filter) {
    if (width == 0 || height == 0 || width > 65536 || height > 65536 || src.width == 0 || src.height == 0)
        fail("resize_image_torch: %zux%zu to %zux%zu is out of range (1..65536)", src.width, src.height, width, height);
    Image cur = src;  // horizontal pass first, always (aten upsample_avx_bilinear_bicubic_uint8)
    if (width != src.width) cur = resample_horizontal(cur, width, precompute(src.width, width, filter, true));
    if (height != src.height) cur = resample_vertical(cur, height, precompute(src.height, height, filter, true));
    return cur;
}

Image crop_image(const Image& src, size_t x, size_t y, size_t w, size_t h) {
    if (w == 0 || h == 0 || x + w > src.width || y + h > src.height)
        fail("crop_image: %zux%zu at (%zu, %zu) outside a %zux%zu image", w, h, x, y, src.width, src.height);
    Image dst;
    dst.width = w;
    dst.height = h;
    dst.rgb.resize(w * h * 3);
    for (size_t r = 0; r < h; ++r)
        std::copy_n(src.rgb.data() + ((y + r) * src.width + x) * 3, w * 3, dst.rgb.data() + r * w * 3);
    return dst;
}

std::vector<float> normalize_planes(const Image& img, const float mean[3], const float std[3]) {
    const size_t n = img.width * img.height;
    std::vector<float> planes(3 * n);
    for (size_t i = 0; i < n; ++i)
        for (size_t c = 0; c < 3; ++c) planes[c * n + i] = (float(img.rgb[i * 3 + c]) / 255.0f - mean[c]) / std[c];
    return planes;
}

TiledImage idefics3_tiles(const Image& img, size_t tile, size_t longest_edge) {
    if (tile == 0 || longest_edge == 0) fail("idefics3_tiles: tile %zu, longest edge %zu", tile, longest_edge);
    // Step 1: aspect kept, longest side = longest_edge, the other truncated then rounded up to even.
    const double aspect = double(img.width) / double(img.height);
    size_t rw, rh;
    if (img.width >= img.height) {
        rw = longest_edge;
        rh = size_t(int(double(longest_edge) / aspect));
        rh += rh % 2;
    } else {
        rh = longest_edge;
        rw = size_t(int(double(longest_edge) * aspect));
        rw += rw % 2;
    }
    rw = std::max<size_t>(rw, 1);
    rh = std::max<size_t>(rh, 1);
    // Step 2: stretched up to whole tiles.
    TiledImage out;
    out.grid_x = (rw + tile - 1) / tile;
    out.grid_y = (rh + tile - 1) / tile;
    const Image resized = resize_image(img, rw, rh, ResizeFilter::LANCZOS);
    const Image refined = resize_image(resized, out.grid_x * tile, out.grid_y * tile, ResizeFilter::LANCZOS);
    out.overview = resize_image(refined, tile, tile, ResizeFilter::LANCZOS);
    if (out.grid_x * out.grid_y == 1) {  // no split: the global image alone (transformers)
        out.grid_x = out.grid_y = 0;
        return out;
    }
    for (size_t y = 0; y < out.grid_y; ++y)
        for (size_t x = 0; x < out.grid_x; ++x)
            out.tiles.push_back(crop_image(refined, x * tile, y * tile, tile, tile));
    return out;
}

Image gemma3_image(const Image& img, size_t side) {
    if (side == 0) fail("gemma3_image: image size 0");
    if (img.width == side && img.height == side) return img;
    return resize_image(img, side, side, ResizeFilter::BILINEAR);
}

std::pair<size_t, size_t> gemma4_image_size(size_t width, size_t height, size_t max_soft_tokens) {
    if (max_soft_tokens != 70 && max_soft_tokens != 140 && max_soft_tokens != 280 && max_soft_tokens != 560 &&
        max_soft_tokens != 1120)
        fail("gemma4_image: max_soft_tokens %zu is not one of 70, 140, 280, 560, 1120", max_soft_tokens);
    if (width == 0 || height == 0) fail("gemma4_image: empty %zux%zu image", width, height);
    const size_t patch = 16, pool = 3, unit = patch * pool;
    const size_t max_patches = max_soft_tokens * pool * pool;
    const double target_px = double(max_patches * patch * patch);
    const double factor = std::sqrt(target_px / (double(height) * double(width)));
    size_t th = size_t(std::floor(factor * double(height) / double(unit))) * unit;
    size_t tw = size_t(std::floor(factor * double(width) / double(unit))) * unit;
    const size_t max_side = (max_patches / (pool * pool)) * unit;
    if (th == 0 && tw == 0) fail("gemma4_image: a %zux%zu image resizes to 0x0", width, height);
    // Python's int(floor(w / h)) on exact integers: integer division.
    if (th == 0) {
        th = unit;
        tw = std::min((width / height) * unit, max_side);
    } else if (tw == 0) {
        tw = unit;
        th = std::min((height / width) * unit, max_side);
    }
    if (double(th) * double(tw) > target_px)
        fail("gemma4_image: resizing %zux%zu to %zux%zu exceeds %zu patches", width, height, tw, th, max_patches);
    return {tw, th};
}

Image gemma4_image(const Image& img, size_t max_soft_tokens) {
    const auto [w, h] = gemma4_image_size(img.width, img.height, max_soft_tokens);
    if (w == img.width && h == img.height) return img;
    // The horizontal pass holds w x src height pixels: bounded by the budget's side and the decoder's.
    if (double(w) * double(img.height) > 64.0 * 1024 * 1024)
        fail("gemma4_image: resizing %zux%zu to %zux%zu needs too large an intermediate image", img.width, img.height,
             w, h);
    return resize_image_torch(img, w, h, ResizeFilter::BICUBIC);
}

std::vector<float> gemma4_planes(const Image& img) {
    const size_t n = img.width * img.height;
    const float scale = float(1.0 / 255.0);  // torch: uint8 tensor * python float, in float32
    std::vector<float> planes(3 * n);
    for (size_t i = 0; i < n; ++i)
        for (size_t c = 0; c < 3; ++c) planes[c * n + i] = float(img.rgb[i * 3 + c]) * scale;
    return planes;
}

namespace {

void check_lfm2_config(const Lfm2Config& c, const char* who) {
    if (c.patch == 0 || c.downsample == 0 || c.min_tokens == 0 || c.max_tokens < c.min_tokens || c.tile == 0 ||
        c.tile % (c.patch * c.downsample) != 0 || c.min_tiles == 0 || c.max_tiles < c.min_tiles || c.max_tiles > 64)
        fail("%s: patch %zu, downsample %zu, tokens %zu..%zu, tile %zu, tiles %zu..%zu are not a valid LFM2 setup", who,
             c.patch, c.downsample, c.min_tokens, c.max_tokens, c.tile, c.min_tiles, c.max_tiles);
}

// Python's round(x / f) * f (half to even: the default rounding mode of nearbyint).
double round_by_factor(double x, double f) { return std::nearbyint(x / f) * f; }

}  // namespace

std::pair<size_t, size_t> lfm2_smart_size(size_t width, size_t height, const Lfm2Config& c) {
    check_lfm2_config(c, "lfm2_smart_size");
    if (width == 0 || height == 0) fail("lfm2_smart_size: image %zux%zu", width, height);
    const double f = double(c.patch * c.downsample), h = double(height), w = double(width);
    const double min_px = double(c.min_tokens) * f * f, max_px = double(c.max_tokens) * f * f;
    double h_bar = std::max(f, round_by_factor(h, f)), w_bar = std::max(f, round_by_factor(w, f));
    if (h_bar * w_bar > max_px) {
        const double beta = std::sqrt(h * w / max_px);
        h_bar = std::max(f, std::floor(h / beta / f) * f);
        w_bar = std::max(f, std::floor(w / beta / f) * f);
    } else if (h_bar * w_bar < min_px) {
        const double beta = std::sqrt(min_px / (h * w));
        h_bar = std::ceil(h * beta / f) * f;
        w_bar = std::ceil(w * beta / f) * f;
    }
    return {size_t(w_bar), size_t(h_bar)};
}

bool lfm2_needs_tiles(size_t width, size_t height, const Lfm2Config& c) {
    check_lfm2_config(c, "lfm2_needs_tiles");
    const double f = double(c.patch * c.downsample), p = double(c.patch);
    const double h_bar = std::max(p, round_by_factor(double(height), f));
    const double w_bar = std::max(p, round_by_factor(double(width), f));
    return h_bar * w_bar > double(c.max_tokens) * f * f * c.max_pixels_tolerance;
}

std::pair<size_t, size_t> lfm2_grid(size_t width, size_t height, const Lfm2Config& c) {
    check_lfm2_config(c, "lfm2_grid");
    if (width == 0 || height == 0) fail("lfm2_grid: image %zux%zu", width, height);
    // Target grids (w, h) with min_tiles <= w * h <= max_tiles, ordered by tile count.
    std::vector<std::pair<size_t, size_t>> ratios;
    for (size_t n = c.min_tiles; n <= c.max_tiles; ++n)
        for (size_t gw = 1; gw <= n; ++gw)
            for (size_t gh = 1; gh <= n; ++gh)
                if (gw * gh == n) ratios.push_back({gw, gh});
    const double aspect = double(width) / double(height), area = double(width) * double(height);
    double best_diff = INFINITY;
    std::pair<size_t, size_t> best = {1, 1};
    for (const auto& r : ratios) {
        const double diff = std::fabs(aspect - double(r.first) / double(r.second));
        if (diff < best_diff) {
            best_diff = diff;
            best = r;
        } else if (diff == best_diff && area > 0.5 * double(c.tile * c.tile * r.first * r.second)) {
            best = r;  // equally close: the larger grid when the image covers half of it
        }
    }
    return best;
}

TiledImage lfm2_tiles(const Image& img, const Lfm2Config& c) {
    const auto thumb = lfm2_smart_size(img.width, img.height, c);
    TiledImage out;
    out.overview = resize_image_torch(img, thumb.first, thumb.second, ResizeFilter::BILINEAR);
    if (!lfm2_needs_tiles(img.width, img.height, c)) return out;
    const auto grid = lfm2_grid(img.width, img.height, c);
    out.grid_x = grid.first;
    out.grid_y = grid.second;
    // Stretched to the grid (transformers; llama.cpp letterboxes here instead: docs/VISION.md).
    const Image refined = resize_image_torch(img, out.grid_x * c.tile, out.grid_y * c.tile, ResizeFilter::BILINEAR);
    for (size_t y = 0; y < out.grid_y; ++y)
        for (size_t x = 0; x < out.grid_x; ++x)
            out.tiles.push_back(crop_image(refined, x * c.tile, y * c.tile, c.tile, c.tile));
    return out;
}

std::vector<LayoutPiece> lfm2_layout(size_t grid_x, size_t grid_y) {
    std::vector<LayoutPiece> out = {{"<|image_start|>", -1}};
    if (grid_x * grid_y > 0) {
        for (size_t y = 0; y < grid_y; ++y)
            for (size_t x = 0; x < grid_x; ++x) {
                out.push_back({"<|img_row_" + std::to_string(y + 1) + "_col_" + std::to_string(x + 1) + "|>", -1});
                out.push_back({"", int(1 + y * grid_x + x)});
            }
        out.push_back({"<|img_thumbnail|>", -1});
    }
    out.push_back({"", 0});
    out.push_back({"<|image_end|>", -1});
    return out;
}

std::vector<LayoutPiece> idefics3_layout(size_t grid_x, size_t grid_y) {
    const std::string fake = "<fake_token_around_image>";
    std::vector<LayoutPiece> out;
    for (size_t y = 0; y < grid_y; ++y) {
        for (size_t x = 0; x < grid_x; ++x) {
            out.push_back({fake + "<row_" + std::to_string(y + 1) + "_col_" + std::to_string(x + 1) + ">", -1});
            out.push_back({"", int(1 + y * grid_x + x)});
        }
        if (y + 1 < grid_y) out.push_back({"\n", -1});
    }
    out.push_back({std::string(grid_y > 0 ? "\n\n" : "") + fake + "<global-img>", -1});
    out.push_back({"", 0});
    out.push_back({fake, -1});
    return out;
}

}  // namespace cactus
