#include "ops/conformer_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cactus {

void clamp_ref(float* y, const float* x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}

void transpose_ref(float* y, const float* x, size_t n_rows, size_t width) {
    for (size_t r = 0; r < n_rows; ++r) {
        for (size_t c = 0; c < width; ++c) y[c * n_rows + r] = x[r * width + c];
    }
}

float sigmoid_ref(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void sigmoid_glu_ref(float* out, const float* gate, const float* up, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = sigmoid_ref(gate[i]) * up[i];
}

void causal_depthwise_conv_row_ref(float* y_row, const float* x, const float* w, size_t t, size_t width,
                                   size_t kernel) {
    for (size_t c = 0; c < width; ++c) {
        float sum = 0.0f;
        for (size_t k = 0; k < kernel; ++k) {
            const size_t back = kernel - 1 - k;  // rows before t
            if (back > t) continue;
            sum += w[c * kernel + k] * x[(t - back) * width + c];
        }
        y_row[c] = sum;
    }
}

void local_attention_row_ref(float* out_row, const float* q, const float* k, const float* v, const float* rel,
                             const float* q_scale, size_t t, const LocalAttention& a) {
    const size_t width = a.n_head * a.head_dim;
    const size_t first = t + 1 >= a.window ? t + 1 - a.window : 0;
    std::vector<float> qs(a.head_dim), p(t + 1 - first);
    for (size_t h = 0; h < a.n_head; ++h) {
        const float* qh = q + t * width + h * a.head_dim;
        for (size_t i = 0; i < a.head_dim; ++i) qs[i] = qh[i] * q_scale[i];
        float max_l = -INFINITY;
        for (size_t s = first; s <= t; ++s) {
            const float* kh = k + s * width + h * a.head_dim;
            const float* rh = rel + (t - s) * width + h * a.head_dim;
            float ac = 0.0f, bd = 0.0f;
            for (size_t i = 0; i < a.head_dim; ++i) {
                ac += qs[i] * (kh[i] * a.k_scale);
                bd += qs[i] * rh[i];
            }
            const float l = a.softcap * std::tanh((ac + bd) / a.softcap);
            p[s - first] = l;
            max_l = std::max(max_l, l);
        }
        float sum = 0.0f;
        for (float& l : p) sum += (l = std::exp(l - max_l));
        float* oh = out_row + h * a.head_dim;
        std::fill(oh, oh + a.head_dim, 0.0f);
        for (size_t s = first; s <= t; ++s) {
            const float w = p[s - first] / sum;
            const float* vh = v + s * width + h * a.head_dim;
            for (size_t i = 0; i < a.head_dim; ++i) oh[i] += w * vh[i];
        }
    }
}

}  // namespace cactus
