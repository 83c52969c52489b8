#include "backends/cpu/ops_cpu.h"

#include <cmath>

#include "core/error.h"
#include "ops/quant.h"
#include <vector>

namespace cactus {

namespace {

const float* half_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float_ref(static_cast<uint16_t>(i));
        return t;
    }();
    return table.data();
}

float sum_of_squares(const float* x, size_t n) {
    float acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (size_t j = 0; j < 8; ++j) acc[j] += x[i + j] * x[i + j];
    }
    float sum = 0.0f;
    for (; i < n; ++i) sum += x[i] * x[i];
    for (float a : acc) sum += a;
    return sum;
}

}  // namespace

float half_to_float(uint16_t h) { return half_table()[h]; }

const float* half_to_float_table() { return half_table(); }

void float_to_half_row(uint16_t* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = float_to_half_ref(src[i]);
}

void rms_norm(float* y, const float* x, const float* w, size_t n, float eps) {
    const float scale = 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
    if (w) {
        for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
    } else {
        for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void rms_norm_rows(float* y, const float* x, const float* w, size_t n_rows, size_t n, float eps) {
    for (size_t r = 0; r < n_rows; ++r) rms_norm(y + r * n, x + r * n, w, n, eps);
}

void rope_cos_sin(float* cs, int32_t pos, const RopeParams& params) {
    const size_t half = params.n_rot / 2;
    for (size_t i = 0; i < half; ++i) {
        const double theta = rope_theta(params, pos, i);
        cs[2 * i] = static_cast<float>(std::cos(theta));
        cs[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
}

void rope_rotate(float* x, size_t n_head, size_t head_dim, const float* cs, const RopeParams& params) {
    const size_t half = params.n_rot / 2;
    const bool neox = params.style == RopeStyle::NEOX;
    for (size_t h = 0; h < n_head; ++h) {
        float* head = x + h * head_dim;
        for (size_t i = 0; i < half; ++i) {
            const size_t a = neox ? i : 2 * i;
            const size_t b = neox ? i + half : 2 * i + 1;
            const float x0 = head[a];
            const float x1 = head[b];
            head[a] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
            head[b] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
        }
    }
}

void rope(float* x, size_t n_head, size_t head_dim, int32_t pos, const RopeParams& params) {
    float on_stack[512];
    std::vector<float> on_heap(params.n_rot <= 512 ? 0 : params.n_rot);
    float* cs = params.n_rot <= 512 ? on_stack : on_heap.data();
    rope_cos_sin(cs, pos, params);
    rope_rotate(x, n_head, head_dim, cs, params);
}

void softmax(float* x, size_t n) {
    if (n == 0) return;
    float max = x[0];
    for (size_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

// swiglu and geglu: activations.cpp (one implementation per ISA).

void add_scaled(float* dst, const float* src, float scale, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] += src[i] * scale;
}

}  // namespace cactus
