#include "ops/ops_ref.h"

#include <algorithm>
#include <cmath>

#include "ops/quant.h"
#include <cstring>
#include <vector>

#include "core/error.h"

namespace cactus {

void rms_norm_ref(float* y, const float* x, const float* w, size_t n, float eps) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
    for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

double rope_theta(const RopeParams& params, int32_t pos, size_t i) {
    const double inv_freq = std::pow(static_cast<double>(params.freq_base), -2.0 * i / params.n_rot);
    const double theta = pos * params.freq_scale * inv_freq;
    return params.freq_factors ? theta / params.freq_factors[i] : theta;
}

void rope_ref(float* x, size_t n_head, size_t head_dim, int32_t pos, const RopeParams& params) {
    CACTUS_ASSERT(params.n_rot % 2 == 0 && params.n_rot <= head_dim);
    const size_t half = params.n_rot / 2;
    for (size_t h = 0; h < n_head; ++h) {
        float* head = x + h * head_dim;
        for (size_t i = 0; i < half; ++i) {
            const double theta = rope_theta(params, pos, i);
            const float c = static_cast<float>(std::cos(theta));
            const float s = static_cast<float>(std::sin(theta));
            const size_t a = params.style == RopeStyle::NORMAL ? 2 * i : i;
            const size_t b = params.style == RopeStyle::NORMAL ? 2 * i + 1 : i + half;
            const float x0 = head[a];
            const float x1 = head[b];
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
}

void softmax_ref(float* x, size_t n) {
    if (n == 0) return;
    float max = x[0];
    for (size_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

float gelu_tanh_ref(float x) {
    const double k = std::sqrt(2.0 / M_PI);
    const double xd = x;
    return static_cast<float>(0.5 * xd * (1.0 + std::tanh(k * (xd + 0.044715 * xd * xd * xd))));
}

float silu_ref(float x) { return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x)))); }

float softcap_ref(float x, float cap) { return cap * std::tanh(x / cap); }

void swiglu_ref(float* out, const float* gate, const float* up, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = silu_ref(gate[i]) * up[i];
}

void geglu_ref(float* out, const float* gate, const float* up, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = gelu_tanh_ref(gate[i]) * up[i];
}

void attention_head_ref(float* out, const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v,
                        size_t v_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                        float scale, const AttentionMask& mask) {
    // The query and the attention weights are rounded to f16, the precision of the KV rows.
    std::vector<double> scores(n_rows, 0.0);
    double max = -INFINITY;
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        double dot = 0.0;
        for (size_t d = 0; d < head_dim; ++d)
            dot += half_to_float_ref(fp32_to_fp16(q[d])) * half_to_float_ref(k[r * k_stride + d]);
        scores[r] = dot * scale;
        max = std::fmax(max, scores[r]);
    }
    double sum = 0.0;
    for (size_t r = 0; r < n_rows; ++r) {
        if (attention_row_visible(mask, row_pos[r])) sum += std::exp(scores[r] - max);
    }
    std::vector<double> acc(head_dim_v, 0.0);
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        const double p = half_to_float_ref(fp32_to_fp16(static_cast<float>(std::exp(scores[r] - max) / sum)));
        for (size_t d = 0; d < head_dim_v; ++d) acc[d] += p * half_to_float_ref(v[r * v_stride + d]);
    }
    for (size_t d = 0; d < head_dim_v; ++d) out[d] = sum > 0.0 ? static_cast<float>(acc[d]) : 0.0f;
}

void attention_head_q8_ref(float* out, const float* q, const int8_t* k, size_t k_stride, const float* k_scale,
                           size_t k_scale_stride, const int8_t* v, size_t v_stride, const float* v_scale,
                           size_t v_scale_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim,
                           size_t head_dim_v, float scale, const AttentionMask& mask) {
    constexpr size_t kGroup = 32;  // kKvGroup (src/kv/kv_options.h)
    std::vector<double> scores(n_rows, 0.0);
    double max = -INFINITY;
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        double dot = 0.0;
        for (size_t d = 0; d < head_dim; ++d) {
            dot += static_cast<double>(q[d]) * k_scale[r * k_scale_stride + d / kGroup] * k[r * k_stride + d];
        }
        scores[r] = dot * scale;
        max = std::fmax(max, scores[r]);
    }
    double sum = 0.0;
    for (size_t r = 0; r < n_rows; ++r) {
        if (attention_row_visible(mask, row_pos[r])) sum += std::exp(scores[r] - max);
    }
    std::vector<double> acc(head_dim_v, 0.0);
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        const double p = std::exp(scores[r] - max) / sum;
        for (size_t d = 0; d < head_dim_v; ++d) {
            acc[d] += p * v_scale[r * v_scale_stride + d / kGroup] * v[r * v_stride + d];
        }
    }
    for (size_t d = 0; d < head_dim_v; ++d) out[d] = sum > 0.0 ? static_cast<float>(acc[d]) : 0.0f;
}

void attention_head_f32_ref(float* out, const float* q, const float* k, size_t k_stride, const float* v,
                            size_t v_stride, const int32_t* row_pos, size_t n_rows, size_t head_dim, size_t head_dim_v,
                            float scale, const AttentionMask& mask) {
    std::vector<double> scores(n_rows, 0.0);
    double max = -INFINITY;
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        double dot = 0.0;
        for (size_t d = 0; d < head_dim; ++d) dot += static_cast<double>(q[d]) * k[r * k_stride + d];
        scores[r] = dot * scale;
        max = std::fmax(max, scores[r]);
    }
    double sum = 0.0;
    for (size_t r = 0; r < n_rows; ++r) {
        if (attention_row_visible(mask, row_pos[r])) sum += std::exp(scores[r] - max);
    }
    std::vector<double> acc(head_dim_v, 0.0);
    for (size_t r = 0; r < n_rows; ++r) {
        if (!attention_row_visible(mask, row_pos[r])) continue;
        const double p = std::exp(scores[r] - max) / sum;
        for (size_t d = 0; d < head_dim_v; ++d) acc[d] += p * v[r * v_stride + d];
    }
    for (size_t d = 0; d < head_dim_v; ++d) out[d] = sum > 0.0 ? static_cast<float>(acc[d]) : 0.0f;
}

float half_to_float_ref(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    float value;
    if (exp == 0) {
        value = std::ldexp(static_cast<float>(mant), -24);  // zero and subnormals
    } else if (exp == 31) {
        value = mant ? NAN : INFINITY;
    } else {
        value = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
    }
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    bits |= sign;
    std::memcpy(&value, &bits, 4);
    return value;
}

uint16_t float_to_half_ref(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN / inf
    if (abs >= 0x477ff000u) return sign | 0x7c00;                                 // rounds to >= 65520: overflow to inf
    if (abs < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
        // value * 2^24 rounded to nearest even is the subnormal mantissa.
        const float scaled = std::fabs(f) * 16777216.0f;
        return sign | static_cast<uint16_t>(std::nearbyint(scaled));
    }
    const uint32_t exp = (abs >> 23) - 127 + 15;
    uint32_t mant = abs & 0x7fffffu;
    uint32_t half = (exp << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into the exponent
    return sign | static_cast<uint16_t>(half);
}

void layer_norm_ref(float* y, const float* x, const float* w, const float* b, size_t n, float eps) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(n);
    double var = 0.0;
    for (size_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(n) + eps));
    for (size_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(x[i] - mean) * inv;
        y[i] = v * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

void short_conv_ref(float* y, float* bx, const float* bcx, const float* w, const float* state, size_t state_rows,
                    const int32_t* hist, size_t n, size_t e, size_t L) {
    for (size_t i = 0; i < n; ++i) {  // bx first: later rows read earlier rows of the batch
        const float* row = bcx + i * 3 * e;
        for (size_t c = 0; c < e; ++c) bx[i * e + c] = row[c] * row[2 * e + c];
    }
    std::vector<const float*> src(L);  // [L] the rows tap k reads (nullptr = zero)
    for (size_t i = 0; i < n; ++i) {
        src[L - 1] = bx + i * e;
        for (size_t d = 1; d < L; ++d) {
            const int32_t v = hist[i * (L - 1) + d - 1];
            const float* r = nullptr;
            if (v >= 0) {
                if (static_cast<size_t>(v) >= n) fail("short_conv_ref: batch row %d of %zu", v, n);
                r = bx + static_cast<size_t>(v) * e;
            } else if (v <= -2) {
                const size_t s = static_cast<size_t>(-2 - static_cast<int64_t>(v));
                if (s >= state_rows) fail("short_conv_ref: state row %zu of %zu", s, state_rows);
                r = state + s * e;
            }
            src[L - 1 - d] = r;
        }
        const float* c_row = bcx + i * 3 * e + e;
        for (size_t c = 0; c < e; ++c) {
            float sum = 0.0f;
            for (size_t k = 0; k < L; ++k)
                if (src[k]) sum += src[k][c] * w[c * L + k];
            y[i * e + c] = c_row[c] * sum;
        }
    }
}

void top_k_row_ref(int32_t* ids, float* vals, float* stats, const float* logits, size_t n_vocab, size_t k) {
    CACTUS_ASSERT(k >= 1 && k <= n_vocab);
    std::vector<int32_t> order(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) order[i] = static_cast<int32_t>(i);
    const auto larger = [&](int32_t a, int32_t b) {
        const uint32_t ka = top_k_order_key(logits[a]), kb = top_k_order_key(logits[b]);
        return ka > kb || (ka == kb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(), larger);
    for (size_t j = 0; j < k; ++j) {
        ids[j] = order[j];
        vals[j] = logits[order[j]];
    }
    const float max = std::isnan(logits[0]) ? logits[0] : vals[0];
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; ++i)
        if (!std::isnan(logits[i])) sum += std::exp(static_cast<double>(logits[i]) - static_cast<double>(max));
    stats[0] = max;
    stats[1] = std::isfinite(max) ? static_cast<float>(sum) : NAN;
}

}  // namespace cactus
