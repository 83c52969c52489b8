// Type dispatch of the scalar reference kernels, half-precision conversions and the float formats.
// The block formats live in quant_legacy.cpp (32-element) and quant_kquants.cpp (K-quants).
#include "ops/quant.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/quant_ref.h"

namespace cactus {

namespace {

uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
}

float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

struct TypeKernels {
    DType type;
    DType dot_type;  // activation type of vec_dot
    void (*dequantize)(float*, const void*, size_t);
    void (*quantize)(void*, const float*, size_t);
    float (*vec_dot)(const void*, const void*, size_t);
};

constexpr TypeKernels kKernels[] = {
    {DType::F32, DType::F32, ref::dequantize_row_f32, ref::quantize_row_f32, ref::vec_dot_f32},
    {DType::F16, DType::F32, ref::dequantize_row_f16, ref::quantize_row_f16, ref::vec_dot_f16},
    {DType::BF16, DType::F32, ref::dequantize_row_bf16, ref::quantize_row_bf16, ref::vec_dot_bf16},
    {DType::Q4_0, DType::Q8_0, ref::dequantize_row_q4_0, ref::quantize_row_q4_0, ref::vec_dot_q4_0},
    {DType::Q4_1, DType::Q8_1, ref::dequantize_row_q4_1, ref::quantize_row_q4_1, ref::vec_dot_q4_1},
    {DType::Q5_0, DType::Q8_0, ref::dequantize_row_q5_0, ref::quantize_row_q5_0, ref::vec_dot_q5_0},
    {DType::Q5_1, DType::Q8_1, ref::dequantize_row_q5_1, ref::quantize_row_q5_1, ref::vec_dot_q5_1},
    {DType::Q8_0, DType::Q8_0, ref::dequantize_row_q8_0, ref::quantize_row_q8_0, ref::vec_dot_q8_0},
    {DType::Q8_1, DType::Q8_1, ref::dequantize_row_q8_1, ref::quantize_row_q8_1, nullptr},
    {DType::Q2_K, DType::Q8_K, ref::dequantize_row_q2_k, ref::quantize_row_q2_k, ref::vec_dot_q2_k},
    {DType::Q3_K, DType::Q8_K, ref::dequantize_row_q3_k, ref::quantize_row_q3_k, ref::vec_dot_q3_k},
    {DType::Q4_K, DType::Q8_K, ref::dequantize_row_q4_k, ref::quantize_row_q4_k, ref::vec_dot_q4_k},
    {DType::Q5_K, DType::Q8_K, ref::dequantize_row_q5_k, ref::quantize_row_q5_k, ref::vec_dot_q5_k},
    {DType::Q6_K, DType::Q8_K, ref::dequantize_row_q6_k, ref::quantize_row_q6_k, ref::vec_dot_q6_k},
    {DType::Q8_K, DType::Q8_K, ref::dequantize_row_q8_k, ref::quantize_row_q8_k, nullptr},
};

const TypeKernels& kernels_for(DType type, const char* caller) {
    for (const TypeKernels& k : kKernels) {
        if (k.type == type) return k;
    }
    const DTypeTraits* traits =
        dtype_is_internal(type) ? &dtype_traits(type) : dtype_traits(static_cast<uint32_t>(type));
    fail("%s: unsupported type %s (id %u)", caller, traits ? traits->name : "unknown", static_cast<unsigned>(type));
}

void check_row_length(DType type, size_t n, const char* caller) {
    const uint32_t block = dtype_traits(type).block_size;
    if (n % block != 0) {
        fail("%s: row length %zu is not a multiple of the %s block size %u", caller, n, dtype_name(type),
             static_cast<unsigned>(block));
    }
}

}  // namespace

// ---- dispatch ------------------------------------------------------------------------------------

DType vec_dot_type(DType weight_type) {
    weight_type = dtype_repacked_from(weight_type);  // a repacked layout takes its file type's activations
    const TypeKernels& k = kernels_for(weight_type, "vec_dot_type");
    if (k.vec_dot == nullptr) fail("vec_dot_type: %s is not a weight type", dtype_name(weight_type));
    return k.dot_type;
}

void dequantize_row_ref(DType type, float* dst, const void* src, size_t n) {
    const TypeKernels& k = kernels_for(type, "dequantize_row_ref");
    check_row_length(type, n, "dequantize_row_ref");
    k.dequantize(dst, src, n);
}

void quantize_row_ref(DType type, void* dst, const float* src, size_t n) {
    const TypeKernels& k = kernels_for(type, "quantize_row_ref");
    check_row_length(type, n, "quantize_row_ref");
    k.quantize(dst, src, n);
}

float vec_dot_ref(DType weight_type, const void* w, const void* x, size_t n) {
    const TypeKernels& k = kernels_for(weight_type, "vec_dot_ref");
    if (k.vec_dot == nullptr) fail("vec_dot_ref: %s is not a weight type", dtype_name(weight_type));
    check_row_length(weight_type, n, "vec_dot_ref");
    return k.vec_dot(w, x, n);
}

// ---- half precision ------------------------------------------------------------------------------

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf / nan
    if (exponent == 0) {
        // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
        return sign ? -magnitude : magnitude;
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round to nearest even, like F16C's vcvtps2ph (the trick of M. Dukhan's FP16 library).
uint16_t fp32_to_fp16(float f) {
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = float_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xff000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_float((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = float_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
    const uint32_t mantissa_bits = bits & 0x00000fffu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a quiet NaN (as ggml does).
uint16_t fp32_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// ---- float formats -------------------------------------------------------------------------------

namespace ref {

void dequantize_row_f32(float* dst, const void* src, size_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void dequantize_row_f16(float* dst, const void* src, size_t n) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void dequantize_row_bf16(float* dst, const void* src, size_t n) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void quantize_row_f32(void* dst, const float* src, size_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void quantize_row_f16(void* dst, const float* src, size_t n) {
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void quantize_row_bf16(void* dst, const float* src, size_t n) {
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

float vec_dot_f32(const void* w, const void* x, size_t n) {
    const float* a = static_cast<const float*>(w);
    const float* b = static_cast<const float*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

float vec_dot_f16(const void* w, const void* x, size_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += fp16_to_fp32(a[i]) * b[i];
    return sum;
}

float vec_dot_bf16(const void* w, const void* x, size_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += bf16_to_fp32(a[i]) * b[i];
    return sum;
}

}  // namespace ref
}  // namespace cactus
