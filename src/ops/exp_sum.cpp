#include "ops/exp_sum.h"

#include <algorithm>

namespace cactus {

void exp_map(float* y, const float* x, size_t n, float max, float scale) {
    for (size_t i = 0; i < n; ++i) y[i] = exp_nonpositive((x[i] - max) * scale);
}

double sum_lanes(const float* x, size_t n) {
    constexpr size_t kChunk = 256;
    constexpr size_t kLanes = 8;
    double total = 0.0;
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t end = std::min(n, i + kChunk);
        float lane[kLanes] = {};
        size_t k = i;
        for (; k + kLanes <= end; k += kLanes)
            for (size_t l = 0; l < kLanes; ++l) lane[l] += x[k + l];
        float part = 0.0f;
        for (; k < end; ++k) part += x[k];
        for (float v : lane) part += v;
        total += static_cast<double>(part);
    }
    return total;
}

double sum_exp_below(const float* x, size_t n, float max) {
    constexpr size_t kChunk = 256;
    float e[kChunk];
    double total = 0.0;
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t m = std::min(kChunk, n - i);
        exp_map(e, x + i, m, max, 1.0f);
        total += sum_lanes(e, m);
    }
    return total;
}

}  // namespace cactus
