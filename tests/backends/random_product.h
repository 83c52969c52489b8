#pragma once
// A random quantized product for the GPU product tests (test_cuda_mmq.cpp, test_cuda_gemm.cpp):
// weight rows of a block type, their dequantized values, and activations.
#include <cstdint>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "core/dtype.h"
#include "ops/quant.h"

namespace cactus::testing {

const DType kQuantTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Shape {
    size_t n;
    size_t n_out;
    size_t n_in;
};

// A random weight [n_out, n_in] of `type` in its blocks, x [n, n_in] in [-2, 2], and the weight's
// dequantized values.
struct Product {
    Shape shape;
    DType type;
    std::vector<uint8_t> bytes;
    std::vector<float> values;
    std::vector<float> x;
};

inline Product make_product(DType type, const Shape& s, uint32_t seed) {
    Product p{s, type, {}, {}, random_floats(s.n * s.n_in, seed + 7, -2.0f, 2.0f)};
    const std::vector<float> src = random_floats(s.n_in * s.n_out, seed);
    const size_t rb = dtype_row_bytes(type, s.n_in);
    p.bytes.assign(rb * s.n_out, 0);
    p.values.assign(s.n_in * s.n_out, 0.0f);
    for (size_t r = 0; r < s.n_out; ++r) {
        quantize_row_ref(type, p.bytes.data() + r * rb, src.data() + r * s.n_in, s.n_in);
        dequantize_row_ref(type, p.values.data() + r * s.n_in, p.bytes.data() + r * rb, s.n_in);
    }
    return p;
}

inline std::string describe(const Product& p) {
    return std::string(dtype_name(p.type)) + " n " + std::to_string(p.shape.n) + " n_out " +
           std::to_string(p.shape.n_out) + " n_in " + std::to_string(p.shape.n_in);
}

}  // namespace cactus::testing
