#pragma once
// Shared helpers of the quantization tests: random rows of every type and error measures.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"

namespace cactus::test {

// Weight types with a dot product, most used first.
inline const std::vector<DType>& weight_types() {
    static const std::vector<DType> types = {DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q6_K, DType::Q4_K,
                                             DType::Q4_0, DType::Q5_1, DType::Q5_K, DType::Q3_K, DType::Q2_K,
                                             DType::F16,  DType::BF16, DType::F32};
    return types;
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Byte offsets of the fp16 scale fields of one block (empty for plain types).
inline std::vector<size_t> half_fields(DType type) {
    switch (type) {
        case DType::Q4_0:
            return {offsetof(BlockQ4_0, d)};
        case DType::Q4_1:
            return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
        case DType::Q5_0:
            return {offsetof(BlockQ5_0, d)};
        case DType::Q5_1:
            return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
        case DType::Q8_0:
            return {offsetof(BlockQ8_0, d)};
        case DType::Q2_K:
            return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
        case DType::Q3_K:
            return {offsetof(BlockQ3_K, d)};
        case DType::Q4_K:
            return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
        case DType::Q5_K:
            return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
        case DType::Q6_K:
            return {offsetof(BlockQ6_K, d)};
        default:
            return {};
    }
}

// A row of n elements: random bytes with sane fp16 scales (every bit pattern of the quants and
// packed sub-scales occurs), or for float types random normal values.
inline std::vector<uint8_t> random_raw_row(DType type, size_t n, std::mt19937& rng) {
    const DTypeTraits& t = dtype_traits(type);
    std::vector<uint8_t> row(dtype_row_bytes(type, n));
    if (t.block_size == 1) {
        std::vector<float> x = random_floats(n, rng);
        quantize_row_ref(type, row.data(), x.data(), n);
        return row;
    }
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.1f);
    for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
    for (size_t blk = 0; blk < n / t.block_size; ++blk) {
        for (size_t off : half_fields(type)) {
            const float s = (byte(rng) & 1 ? 1.0f : -1.0f) * scale(rng);
            const uint16_t h = fp32_to_fp16(s);
            std::memcpy(row.data() + blk * t.block_bytes + off, &h, sizeof(h));
        }
    }
    return row;
}

// A row of n elements quantized from normal data (what real weights look like).
inline std::vector<uint8_t> quantized_row(DType type, size_t n, std::mt19937& rng) {
    std::vector<uint8_t> row(dtype_row_bytes(type, n));
    std::vector<float> x = random_floats(n, rng);
    quantize_row_ref(type, row.data(), x.data(), n);
    return row;
}

// n_out quantized rows of n_in elements, `stride` bytes apart (padding bytes filled with 0xA5).
inline std::vector<uint8_t> quantized_rows(DType type, size_t n_in, size_t n_out, size_t stride, std::mt19937& rng) {
    std::vector<uint8_t> w(stride * n_out, 0xA5);
    for (size_t o = 0; o < n_out; ++o) {
        std::vector<uint8_t> row = quantized_row(type, n_in, rng);
        std::copy(row.begin(), row.end(), w.begin() + o * stride);
    }
    return w;
}

// Activations of n elements in `type` (F32 rows are returned as their bytes).
inline std::vector<uint8_t> quantized_activations(DType type, const std::vector<float>& x) {
    std::vector<uint8_t> row(dtype_row_bytes(type, x.size()));
    quantize_row_ref(type, row.data(), x.data(), x.size());
    return row;
}

inline double float_dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

inline double abs_dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
    return s;
}

}  // namespace cactus::test
