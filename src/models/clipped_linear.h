#pragma once
// Gemma 4's clippable linear (transformers' Gemma4ClippableLinear, in both of its encoder towers):
// clamp the input, W x, clamp the output, the bounds being the scalars the converter stores beside
// the weight (NAME.input_min/.input_max/.output_min/.output_max). A linear stored without them
// clamps to +-infinity, i.e. not at all, and skips the clamp passes.
#include <cmath>
#include <string>

#include "backends/backend.h"
#include "core/error.h"
#include "models/blocks.h"
#include "models/weights.h"

namespace cactus {

struct ClippedLinear {
    Tensor w;  // [n_out, n_in]
    float in_lo = -INFINITY, in_hi = INFINITY, out_lo = -INFINITY, out_hi = INFINITY;
};

// NAME.weight [n_out, n_in] and its clip scalars; throws when a pair of bounds is empty.
inline ClippedLinear load_clipped_linear(WeightLoader& w, const std::string& name, size_t n_in, size_t n_out) {
    ClippedLinear l;
    l.w = w.matrix(name + ".weight", n_in, n_out);
    auto bound = [&](const char* what, float none) {
        const std::string key = name + "." + what;
        return w.has(key) ? w.host_vector(key, 1)[0] : none;
    };
    l.in_lo = bound("input_min", -INFINITY);
    l.in_hi = bound("input_max", INFINITY);
    l.out_lo = bound("output_min", -INFINITY);
    l.out_hi = bound("output_max", INFINITY);
    if (!(l.in_lo <= l.in_hi) || !(l.out_lo <= l.out_hi))
        fail("load mmproj: %s clamps to [%g, %g] then [%g, %g]", name.c_str(), l.in_lo, l.in_hi, l.out_lo, l.out_hi);
    return l;
}

// y [n, n_out] = clamp_out(W clamp_in(x [n, n_in])); xc: scratch of x's shape for the clamped input
// (x itself clamps x in place).
inline void clipped_linear(Backend& be, const Blocks& nn, const Tensor& y, const ClippedLinear& l, const Tensor& x,
                           const Tensor& xc) {
    const bool clamp_in = std::isfinite(l.in_lo) || std::isfinite(l.in_hi);
    if (clamp_in) be.clamp(xc, x, l.in_lo, l.in_hi);
    nn.encoder_linear(y, l.w, clamp_in ? xc : x);
    if (std::isfinite(l.out_lo) || std::isfinite(l.out_hi)) be.clamp(y, y, l.out_lo, l.out_hi);
}

}  // namespace cactus
