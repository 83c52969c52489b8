// LFM2-VL: the position grid resize, pixel unshuffle and the 2-layer MLP projector (see the header).
#include "models/vision/lfm2_projector.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/vision/vision_encoder.h"
#include "models/weights.h"

namespace cactus {
namespace {

// Weights [n_out, n_in] of an antialiased bilinear resize along one axis (torch's AA kernel with
// align_corners=False; for upscaling it equals plain bilinear with edge clamping).
std::vector<double> axis_weights(size_t n_in, size_t n_out) {
    std::vector<double> w(n_out * n_in, 0.0);
    const double scale = double(n_in) / double(n_out);
    const double support = std::max(scale, 1.0);
    for (size_t o = 0; o < n_out; ++o) {
        const double center = (double(o) + 0.5) * scale - 0.5;
        double sum = 0.0;
        for (size_t i = 0; i < n_in; ++i) {
            const double v = std::max(0.0, 1.0 - std::fabs(double(i) - center) / support);
            w[o * n_in + i] = v;
            sum += v;
        }
        for (size_t i = 0; i < n_in; ++i) w[o * n_in + i] /= sum;  // sum > 0: the nearest input is within support
    }
    return w;
}

}  // namespace

void resize_position_grid(const float* grid, size_t side, size_t d, size_t gw, size_t gh, std::vector<float>* out) {
    if (side == 0 || gw == 0 || gh == 0 || gw > 4096 || gh > 4096)
        fail("resize_position_grid: %zux%zu grid to %zux%zu patches is out of range (1..4096)", side, side, gw, gh);
    const std::vector<double> wy = axis_weights(side, gh), wx = axis_weights(side, gw);
    // Columns first: tmp [side, gw, d], then rows: out [gh, gw, d].
    std::vector<double> tmp(side * gw * d, 0.0), acc(d);
    for (size_t y = 0; y < side; ++y)
        for (size_t x = 0; x < gw; ++x) {
            double* t = &tmp[(y * gw + x) * d];
            for (size_t i = 0; i < side; ++i) {
                const double w = wx[x * side + i];
                if (w == 0.0) continue;
                const float* g = grid + (y * side + i) * d;
                for (size_t c = 0; c < d; ++c) t[c] += w * g[c];
            }
        }
    out->resize(gh * gw * d);
    for (size_t y = 0; y < gh; ++y)
        for (size_t x = 0; x < gw; ++x) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (size_t i = 0; i < side; ++i) {
                const double w = wy[y * side + i];
                if (w == 0.0) continue;
                const double* t = &tmp[(i * gw + x) * d];
                for (size_t c = 0; c < d; ++c) acc[c] += w * t[c];
            }
            float* o = out->data() + (y * gw + x) * d;
            for (size_t c = 0; c < d; ++c) o[c] = float(acc[c]);
        }
}

void pixel_unshuffle(const float* x, size_t gw, size_t gh, size_t d, size_t s, std::vector<float>* out) {
    if (s == 0 || gw % s != 0 || gh % s != 0)
        fail("pixel_unshuffle: %zux%zu patches do not split into %zu-blocks", gw, gh, s);
    const size_t ow = gw / s, oh = gh / s;
    out->resize(ow * oh * d * s * s);
    float* o = out->data();
    for (size_t Y = 0; Y < oh; ++Y)
        for (size_t X = 0; X < ow; ++X)
            for (size_t i = 0; i < s; ++i)
                for (size_t j = 0; j < s; ++j, o += d)
                    std::memcpy(o, x + ((Y * s + i) * gw + X * s + j) * d, d * sizeof(float));
}

Lfm2Projector::Lfm2Projector(const GgufFile& file, Backend& backend, WeightLoader& w, const VisionHParams& hp)
    : be_(backend), n_embd_(hp.n_embd), proj_dim_(hp.proj_dim), s_(hp.scale_factor), hidden_(0) {
    const size_t in = n_embd_ * s_ * s_;
    const GgufTensor* t1 = file.find_tensor("mm.1.weight");
    if (!t1 || t1->dims.size() != 2 || t1->dims[0] != in || t1->dims[1] == 0 || t1->dims[1] > (1u << 20))
        fail("load mmproj: mm.1.weight must be {%zu, hidden} (vision width x scale factor^2)", in);
    hidden_ = size_t(t1->dims[1]);
    if (w.has("mm.input_norm.weight")) norm_w_ = w.vector("mm.input_norm.weight", in);
    if (w.has("mm.input_norm.bias")) {
        if (norm_w_.empty()) fail("load mmproj: mm.input_norm.bias without mm.input_norm.weight");
        norm_b_ = w.vector("mm.input_norm.bias", in);
    }
    w1_ = w.matrix("mm.1.weight", in, hidden_);
    b1_ = w.vector("mm.1.bias", hidden_);
    w2_ = w.matrix("mm.2.weight", hidden_, proj_dim_);
    b2_ = w.vector("mm.2.bias", proj_dim_);
}

Lfm2Projector::~Lfm2Projector() = default;

void Lfm2Projector::project(const std::vector<float>& patches, size_t gw, size_t gh, std::vector<float>* out) {
    std::vector<float> merged;
    pixel_unshuffle(patches.data(), gw, gh, n_embd_, s_, &merged);  // [n_tok, n_embd * s * s]
    const size_t in = n_embd_ * s_ * s_, n_tok = merged.size() / in;
    std::unique_ptr<Buffer> buf = be_.alloc((merged.size() + n_tok * (hidden_ + proj_dim_)) * sizeof(float));
    const Tensor x = make_tensor(buf.get(), 0, DType::F32, in, n_tok);
    const Tensor h = make_tensor(buf.get(), merged.size() * sizeof(float), DType::F32, hidden_, n_tok);
    const Tensor y =
        make_tensor(buf.get(), (merged.size() + n_tok * hidden_) * sizeof(float), DType::F32, proj_dim_, n_tok);
    be_.upload(x, merged.data(), merged.size() * sizeof(float));
    if (!norm_w_.empty()) be_.layer_norm(x, x, norm_w_, norm_b_, 1e-5f);
    be_.matmul(h, w1_, x);
    be_.add(h, h, b1_);
    be_.gelu(h, h, Activation::GELU_ERF);
    be_.matmul(y, w2_, h);
    be_.add(y, y, b2_);
    out->resize(n_tok * proj_dim_);
    be_.download(out->data(), y, out->size() * sizeof(float));
}

}  // namespace cactus
