#pragma once
// Scalar reference kernels of the non-quantized transformer ops: RMSNorm, RoPE, softmax, GELU,
// SiLU and attention over a KV cache. They define the math; the optimised CPU kernels
// (src/backends/cpu/ops_cpu.h) are tested against them on random inputs of odd sizes.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cactus {

// How RoPE pairs the dimensions of a head: NORMAL rotates (x[2i], x[2i+1]) (llama),
// NEOX rotates (x[i], x[i + n_rot/2]) (gemma, qwen, ...).
enum class RopeStyle { NORMAL, NEOX };

struct RopeParams {
    RopeStyle style = RopeStyle::NORMAL;
    size_t n_rot = 0;  // rotated dimensions of each head (even, <= head_dim)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // linear position scaling (1 = none)
    // [n_rot / 2] divisors of each pair's frequency (GGUF rope_freqs: Llama 3 scaling, Gemma 4's
    // proportional RoPE, whose 1e30 entries leave a pair unrotated); nullptr = all 1. Not owned:
    // the model keeps them for its lifetime.
    const float* freq_factors = nullptr;
};

// The angle of pair i of a head at position pos: pos * freq_scale * freq_base^(-2i / n_rot) /
// freq_factors[i], in double (every backend's angles are this function's).
double rope_theta(const RopeParams& params, int32_t pos, size_t i);

// Which cached rows a query may see: rows whose position is in [q_pos - window + 1, q_pos]
// (window == 0: every position <= q_pos), plus sink rows (position < sinks, sliding rings with
// attention sinks), plus the `ahead` positions after q_pos (a bidirectional span: the rest of a
// Gemma 3 image, stored in the same step). Rows with position < 0 are empty.
struct AttentionMask {
    int32_t q_pos = 0;
    uint32_t window = 0;
    uint32_t sinks = 0;
    uint32_t ahead = 0;
};

inline bool attention_row_visible(const AttentionMask& mask, int32_t row_pos) {
    if (row_pos < 0 || static_cast<int64_t>(row_pos) > static_cast<int64_t>(mask.q_pos) + mask.ahead) return false;
    if (row_pos < static_cast<int64_t>(mask.sinks)) return true;
    return mask.window == 0 || mask.q_pos - row_pos < static_cast<int64_t>(mask.window);
}

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]  (w == nullptr: no weight). y may alias x.
void rms_norm_ref(float* y, const float* x, const float* w, size_t n, float eps);

// y[i] = (x[i] - mean) / sqrt(var + eps) * w[i] + b[i] (w, b may be nullptr). y may alias x.
void layer_norm_ref(float* y, const float* x, const float* w, const float* b, size_t n, float eps);
// Rotates one token's heads in place. x: [n_head, head_dim].
void rope_ref(float* x, size_t n_head, size_t head_dim, int32_t pos, const RopeParams& params);

// x[i] = exp(x[i] - max) / sum, in place.
void softmax_ref(float* x, size_t n);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float gelu_tanh_ref(float x);
// SiLU: x / (1 + exp(-x)).
float silu_ref(float x);
// Soft-capping (Gemma's final logits): cap * tanh(x / cap).
float softcap_ref(float x, float cap);

// Gated linear units: out[i] = act(gate[i]) * up[i]. out may alias gate or up.
void swiglu_ref(float* out, const float* gate, const float* up, size_t n);
void geglu_ref(float* out, const float* gate, const float* up, size_t n);

// One query head against cached rows (keys and values in IEEE half precision):
//   out[d] = sum_r softmax_r(scale * q.k_r [+ masked]) v_r[d] over the visible rows r.
// q: [head_dim]; k: n_rows rows of head_dim halves with stride k_stride (elements);
// v likewise; row_pos: [n_rows] logical positions; out: [head_dim_v].
// With no visible row, out is all zeros.
void attention_head_ref(float* out, const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v,
                        size_t v_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                        float scale, const AttentionMask& mask);

// As attention_head_ref with int8 keys and values: each row holds head_dim int8 values and one f32
// scale per group of kKvGroup (32) elements (the last group may be shorter). k_scale / v_scale
// point at the row's first scale, with strides k_scale_stride / v_scale_stride (floats). The query
// and the attention weights stay in f32.
void attention_head_q8_ref(float* out, const float* q, const int8_t* k, size_t k_stride, const float* k_scale,
                           size_t k_scale_stride, const int8_t* v, size_t v_stride, const float* v_scale,
                           size_t v_scale_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim,
                           size_t head_dim_v, float scale, const AttentionMask& mask);

// As attention_head_ref with f32 keys and values (kv_cache_type f32): nothing is rounded, the
// query, the rows and the attention weights stay in f32 (scores and sums in double).
void attention_head_f32_ref(float* out, const float* q, const float* k, size_t k_stride, const float* v,
                            size_t v_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                            float scale, const AttentionMask& mask);

// LFM2's short causal depthwise convolution over the rows of a batch (tokens of one or several
// sequences). Per token i: bcx [n, 3 * e] holds (B | C | x); bx [n, e] = B * x (written);
// y [n, e] = C * sum_{k < L} w[c * L + k] * bx(token i - (L - 1) + k), w: [e, L] taps (tap L - 1
// weighs the token itself). hist [n, L - 1]: column d - 1 says where the token d steps back in the
// same sequence is: v >= 0 row v of this batch, v == -1 none (before the sequence starts: zero),
// v <= -2 row (-2 - v) of state [state_rows, e] (earlier steps). Sums run from the oldest tap.
void short_conv_ref(float* y, float* bx, const float* bcx, const float* w, const float* state, size_t state_rows,
                    const int32_t* hist, size_t n, size_t e, size_t L);

// IEEE binary16 conversions (round to nearest even), the reference for the cache's storage.
float half_to_float_ref(uint16_t h);
uint16_t float_to_half_ref(float f);

// The largest k a top_k op returns (Backend::top_k).
constexpr size_t kTopKMax = 256;

// The order of top_k as an unsigned key: larger key = larger logit; -0 and +0 share one key and
// NaN has the smallest (0), below -inf. Equal keys rank by lower id first.
inline uint32_t top_k_order_key(float x) {
    if (x != x) return 0u;
    if (x == 0.0f) x = 0.0f;  // -0 -> +0: the host sampler's comparisons do not tell them apart
    uint32_t u;
    std::memcpy(&u, &x, sizeof(u));
    return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// One row of Backend::top_k: ids [k] and vals [k] the k largest of logits [n_vocab] (by
// top_k_order_key, then lower id), stats [2]: the maximum as the host sampler's argmax sees it
// (logits[0] when that is NaN, else vals[0]) and sum_i exp(logits[i] - maximum) in double, NaN
// terms left out; NaN when the maximum is not finite. 1 <= k <= n_vocab.
void top_k_row_ref(int32_t* ids, float* vals, float* stats, const float* logits, size_t n_vocab, size_t k);

}  // namespace cactus
