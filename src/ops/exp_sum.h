#pragma once
// exp of non-positive floats and sums of exp over logit rows, written so that GCC vectorises the
// loops on every tier's baseline (SSE2 on x86-64, NEON on aarch64) without intrinsics: the
// sampler's probabilities and Whisper's log-softmax over 50k-256k vocabularies (~50 us a row
// instead of ~1 ms of double std::exp).
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace cactus {

// std::bit_cast (C++20) through the builtin GCC and Clang share: unlike memcpy, it keeps the
// loops that call it vectorisable.
template <class To, class From>
inline To bit_cast_value(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast_value: sizes differ");
    return __builtin_bit_cast(To, v);
}

// exp(-|x|) within 2.4e-7 relative, for |x| <= 87 (beyond, and for -inf or NaN, e^-87 ~ 1.6e-38):
// Cody-Waite reduction by ln 2 and a degree-6 Taylor polynomial. Branch-free and without float
// compares (which block GCC's vectoriser under the default -ftrapping-math).
inline float exp_nonpositive(float x) {
    const int32_t magnitude = std::min(bit_cast_value<int32_t>(x) & 0x7FFFFFFF, bit_cast_value<int32_t>(87.0f));
    x = bit_cast_value<float>(magnitude | INT32_MIN);              // -min(|x|, 87)
    const float shifted = x * 1.44269504088896341f + 12582912.0f;  // + 1.5 * 2^23: rounds to an integer
    const float fn = shifted - 12582912.0f;
    const int32_t n = bit_cast_value<int32_t>(shifted) - 0x4B400000;                 // that integer, in [-126, 0]
    const float r = (x - fn * 0.693145751953125f) - fn * 1.428606765330187045e-06f;  // |r| <= ln 2 / 2
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return bit_cast_value<float>(bit_cast_value<int32_t>(p) + n * (1 << 23));  // p * 2^n
}

// y[i] = exp((x[i] - max) * scale) for x[i] <= max, scale > 0 (vectorised; y may be x).
void exp_map(float* y, const float* x, size_t n, float max, float scale);

// Sum of x[i] >= 0 in 8 float lanes per chunk of 256, the chunks in double.
double sum_lanes(const float* x, size_t n);

// Sum over i of exp(x[i] - max) for x[i] <= max (-inf terms add ~1.6e-38 each), in chunks of 256.
double sum_exp_below(const float* x, size_t n, float max);

}  // namespace cactus
