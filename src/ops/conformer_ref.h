#pragma once
// Scalar references of the ops a conformer (Gemma 4's audio tower) adds to the backend: the
// definitions the backends' kernels are tested against (tests/backends/test_backend_conformer_ops.cpp).
#include <cstddef>

namespace cactus {

// y[i] = min(max(x[i], lo), hi) (ReLU: lo 0, hi +inf). y may be x.
void clamp_ref(float* y, const float* x, size_t n, float lo, float hi);

// y [width, n_rows] = x [n_rows, width] transposed.
void transpose_ref(float* y, const float* x, size_t n_rows, size_t width);

// Sigmoid: 1 / (1 + exp(-x)); glu's Activation::SIGMOID (out[i] = sigmoid(gate[i]) * up[i]).
float sigmoid_ref(float x);
void sigmoid_glu_ref(float* out, const float* gate, const float* up, size_t n);

// Causal depthwise convolution over time rows, row t of y [n, width]:
//   y[t, c] = sum_k w[c, k] * x[t - (kernel - 1) + k, c], rows before 0 read as zero.
// w: [width, kernel] taps.
void causal_depthwise_conv_row_ref(float* y_row, const float* x, const float* w, size_t t, size_t width, size_t kernel);

// Local self-attention with relative position keys (USM / Gemma 4 conformer), for one query row t and
// every head: query t sees keys s in [max(0, t - window + 1), t] with logits
//   l = (q_t * q_scale) . (k_s * k_scale) + (q_t * q_scale) . rel[t - s]
// per head (q_scale: [head_dim], the same for every head), softcapped cap * tanh(l / cap), softmax
// over s, out = sum_s p_s v_s. q, k, v: [n, n_head * head_dim]; rel: [window, n_head * head_dim]
// (row d: the relative key of distance d); out_row: [n_head * head_dim].
struct LocalAttention {
    size_t n_head = 0;
    size_t head_dim = 0;
    size_t window = 0;  // keys per query: itself and window - 1 before it
    float k_scale = 1.0f;
    float softcap = 0.0f;  // > 0
};
void local_attention_row_ref(float* out_row, const float* q, const float* k, const float* v, const float* rel,
                             const float* q_scale, size_t t, const LocalAttention& a);

}  // namespace cactus
