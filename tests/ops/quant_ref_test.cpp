// The scalar references of src/ops/quant.h: conversions, round trips, dot products against float
// math, and errors on bad input. (Decoding is checked against the gguf package by
// test_quant_oracle.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

using test::random_floats;

const size_t kBlockCounts[] = {1, 3, 7, 33};

TEST(Fp16, EveryFiniteHalfRoundTrips) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        ASSERT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
    }
}

TEST(Fp16, RoundsToNearestEven) {
    EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
    EXPECT_EQ(fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);            // overflow -> inf
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(5.9604644775390625e-08f), 0x0001);  // smallest subnormal
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
    EXPECT_FLOAT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNan) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
    EXPECT_EQ(fp32_to_bf16(1.00390625f), 0x3f80);  // 1 + 2^-8: tie -> even
    EXPECT_EQ(fp32_to_bf16(1.01171875f), 0x3f82);  // 1 + 3*2^-8: tie -> even (up)
    EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

// Relative squared error of quantize -> dequantize on N(0,1) data.
const std::map<DType, double> kRoundTripNmse = {
    {DType::F32, 0.0},     {DType::F16, 1e-6},    {DType::BF16, 2e-5}, {DType::Q8_0, 5e-5},   {DType::Q8_1, 5e-5},
    {DType::Q8_K, 1.5e-4}, {DType::Q4_0, 1.2e-2}, {DType::Q4_1, 8e-3}, {DType::Q5_0, 3e-3},   {DType::Q5_1, 2e-3},
    {DType::Q2_K, 0.13},   {DType::Q3_K, 0.035},  {DType::Q4_K, 9e-3}, {DType::Q5_K, 2.2e-3}, {DType::Q6_K, 6e-4},
};

TEST(QuantRef, RoundTripErrorIsBounded) {
    std::mt19937 rng(1);
    for (const auto& [type, bound] : kRoundTripNmse) {
        for (size_t blocks : kBlockCounts) {
            const size_t n = blocks * 256;
            std::vector<float> x = random_floats(n, rng);
            std::vector<uint8_t> q(dtype_row_bytes(type, n));
            quantize_row_ref(type, q.data(), x.data(), n);
            std::vector<float> back(n);
            dequantize_row_ref(type, back.data(), q.data(), n);
            double err = 0.0, ref = 0.0;
            for (size_t i = 0; i < n; ++i) {
                err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
                ref += x[i] * static_cast<double>(x[i]);
            }
            EXPECT_LE(err / ref, bound) << dtype_name(type) << " n=" << n;
        }
    }
}

TEST(QuantRef, ZeroBlocksStayZero) {
    for (const auto& entry : kRoundTripNmse) {
        const DType type = entry.first;
        const size_t n = 256;
        std::vector<float> x(n, 0.0f), back(n, 1.0f);
        std::vector<uint8_t> q(dtype_row_bytes(type, n), 0xAB);
        quantize_row_ref(type, q.data(), x.data(), n);
        dequantize_row_ref(type, back.data(), q.data(), n);
        for (float v : back) ASSERT_EQ(v, 0.0f) << dtype_name(type);
    }
}

// vec_dot_ref(w, quantize(x)) against the float64 dot of dequantize(w) with the float x.
// The difference comes from quantizing x (8 bits), measured as NMSE over many rows.
TEST(QuantRef, VecDotMatchesDequantizedFloatDot) {
    std::mt19937 rng(2);
    for (DType type : test::weight_types()) {
        const bool is_float = dtype_traits(type).block_size == 1;
        for (size_t blocks : kBlockCounts) {
            const size_t n = blocks * 256;
            double err = 0.0, ref = 0.0;
            for (int row = 0; row < 16; ++row) {
                std::vector<uint8_t> w = test::quantized_row(type, n, rng);
                std::vector<float> wf(n);
                dequantize_row_ref(type, wf.data(), w.data(), n);
                std::vector<float> x = random_floats(n, rng);
                std::vector<uint8_t> xq = test::quantized_activations(vec_dot_type(type), x);
                const double exact = test::float_dot(wf, x);
                const double got = vec_dot_ref(type, w.data(), xq.data(), n);
                err += (got - exact) * (got - exact);
                ref += exact * exact;
            }
            EXPECT_LE(err / ref, is_float ? 1e-10 : 1e-3) << dtype_name(type) << " n=" << n;
        }
    }
}

TEST(QuantRef, VecDotTypesAreGgmls) {
    EXPECT_EQ(vec_dot_type(DType::Q4_0), DType::Q8_0);
    EXPECT_EQ(vec_dot_type(DType::Q5_0), DType::Q8_0);
    EXPECT_EQ(vec_dot_type(DType::Q8_0), DType::Q8_0);
    EXPECT_EQ(vec_dot_type(DType::Q4_1), DType::Q8_1);
    EXPECT_EQ(vec_dot_type(DType::Q5_1), DType::Q8_1);
    for (DType k : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        EXPECT_EQ(vec_dot_type(k), DType::Q8_K);
    }
    for (DType f : {DType::F32, DType::F16, DType::BF16}) EXPECT_EQ(vec_dot_type(f), DType::F32);
}

TEST(QuantRef, BadInputThrows) {
    std::vector<uint8_t> buf(4096);
    std::vector<float> f(1024);
    EXPECT_THROW(dequantize_row_ref(DType::Q4_0, f.data(), buf.data(), 33), Error);
    EXPECT_THROW(quantize_row_ref(DType::Q4_K, buf.data(), f.data(), 32), Error);
    EXPECT_THROW(vec_dot_ref(DType::Q6_K, buf.data(), buf.data(), 100), Error);
    EXPECT_THROW(dequantize_row_ref(DType::I32, f.data(), buf.data(), 4), Error);
    EXPECT_THROW(dequantize_row_ref(static_cast<DType>(99), f.data(), buf.data(), 4), Error);
    EXPECT_THROW(vec_dot_ref(DType::Q8_K, buf.data(), buf.data(), 256), Error);
    EXPECT_THROW(vec_dot_type(DType::Q8_1), Error);
}

}  // namespace
}  // namespace cactus
