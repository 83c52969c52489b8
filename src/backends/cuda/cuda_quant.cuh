#pragma once
// Device-side dequantization of the GGUF block formats, 32 elements at a time (one chunk). The
// layouts are those of src/ops/quant_blocks.h; the values equal dequantize_row_ref's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace cactus {
namespace cuda {

__device__ __forceinline__ float h2f(const uint8_t* p) {
    const uint16_t bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Chunk c (elements 32c .. 32c+31) of a row of quantized blocks into w[32].
template <DType T>
__device__ __forceinline__ void deq32(const uint8_t* row, int c, float* w);

template <>
__device__ __forceinline__ void deq32<DType::Q4_0>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + c * 18;
    const float d = h2f(b);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const uint8_t q = b[2 + j];
        w[j] = static_cast<float>((q & 15) - 8) * d;
        w[j + 16] = static_cast<float>((q >> 4) - 8) * d;
    }
}

template <>
__device__ __forceinline__ void deq32<DType::Q4_1>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + c * 20;
    const float d = h2f(b);
    const float m = h2f(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const uint8_t q = b[4 + j];
        w[j] = static_cast<float>(q & 15) * d + m;
        w[j + 16] = static_cast<float>(q >> 4) * d + m;
    }
}

__device__ __forceinline__ uint32_t load_u32_bytes(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

template <>
__device__ __forceinline__ void deq32<DType::Q5_0>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + c * 22;
    const float d = h2f(b);
    const uint32_t qh = load_u32_bytes(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const uint8_t q = b[6 + j];
        const int lo = (q & 15) | (((qh >> j) << 4) & 0x10);
        const int hi = (q >> 4) | ((qh >> (j + 12)) & 0x10);
        w[j] = static_cast<float>(lo - 16) * d;
        w[j + 16] = static_cast<float>(hi - 16) * d;
    }
}

template <>
__device__ __forceinline__ void deq32<DType::Q5_1>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + c * 24;
    const float d = h2f(b);
    const float m = h2f(b + 2);
    const uint32_t qh = load_u32_bytes(b + 4);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const uint8_t q = b[8 + j];
        const int lo = (q & 15) | (((qh >> j) << 4) & 0x10);
        const int hi = (q >> 4) | ((qh >> (j + 12)) & 0x10);
        w[j] = static_cast<float>(lo) * d + m;
        w[j + 16] = static_cast<float>(hi) * d + m;
    }
}

template <>
__device__ __forceinline__ void deq32<DType::Q8_0>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + c * 34;
    const float d = h2f(b);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = static_cast<float>(q[j]) * d;
}

template <>
__device__ __forceinline__ void deq32<DType::Q4_K>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + (c >> 3) * 144;
    const int j = c & 7;
    int sc, m;
    k_scale_min(j, b + 4, &sc, &m);
    const float d = h2f(b) * static_cast<float>(sc);
    const float dm = h2f(b + 2) * static_cast<float>(m);
    const uint8_t* qs = b + 16 + (j >> 1) * 32;
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) w[l] = d * static_cast<float>((qs[l] >> shift) & 15) - dm;
}

template <>
__device__ __forceinline__ void deq32<DType::Q5_K>(const uint8_t* row, int c, float* w) {
    const uint8_t* b = row + (c >> 3) * 176;
    const int j = c & 7;
    int sc, m;
    k_scale_min(j, b + 4, &sc, &m);
    const float d = h2f(b) * static_cast<float>(sc);
    const float dm = h2f(b + 2) * static_cast<float>(m);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48 + (j >> 1) * 32;
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 15) | (((qh[l] >> j) & 1) << 4);
        w[l] = d * static_cast<float>(q) - dm;
    }
}

// Q6_K chunk c (elements 32c .. 32c+31: chunk c % 8 of super-block c / 8), for deq32 and the tiled
// products (cuda_mmq.cu): scales(d0, d1) with the scales of its two 16-element halves, then for
// each element l in order element(l, q) (q: 6 bits - 32), and after elements 4i .. 4i+3 word(i, their
// 4 quants). Two hooks, so that each caller's work interleaves with the reads as it would written in
// place: deq32 scales each element as it is read, the tiled products pack each 4 into a word.
template <class Scales, class Element, class Word>
__device__ __forceinline__ void q6_k_chunk(const uint8_t* row, int c, Scales scales, Element element, Word word) {
    const uint8_t* b = row + (c >> 3) * 210;
    const int cc = c & 7;
    const int half = cc >> 2;
    const int k = cc & 3;
    const uint8_t* ql = b + 64 * half + (k & 1) * 32;
    const uint8_t* qh = b + 128 + 32 * half;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half + 2 * k;
    const float d = h2f(b + 208);
    const int lshift = k >= 2 ? 4 : 0;
    scales(d * static_cast<float>(sc[0]), d * static_cast<float>(sc[1]));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        int q[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int l = 4 * i + j;
            q[j] = (((ql[l] >> lshift) & 15) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            element(l, q[j]);
        }
        word(i, q);
    }
}

template <>
__device__ __forceinline__ void deq32<DType::Q6_K>(const uint8_t* row, int c, float* w) {
    float d0, d1;
    q6_k_chunk(
        row, c,
        [&](float s0, float s1) {
            d0 = s0;
            d1 = s1;
        },
        [&](int l, int q) { w[l] = (l < 16 ? d0 : d1) * static_cast<float>(q); }, [](int, const int*) {});
}

// Calls f(std::integral_constant<DType, T>()) for a block-quantized type with a deq32 above (Q4_0 ..
// Q6_K); false for any other type, which f never sees.
template <class F>
bool dispatch_quant(DType type, F&& f) {
    switch (type) {
        case DType::Q4_0:
            f(std::integral_constant<DType, DType::Q4_0>());
            return true;
        case DType::Q4_1:
            f(std::integral_constant<DType, DType::Q4_1>());
            return true;
        case DType::Q5_0:
            f(std::integral_constant<DType, DType::Q5_0>());
            return true;
        case DType::Q5_1:
            f(std::integral_constant<DType, DType::Q5_1>());
            return true;
        case DType::Q8_0:
            f(std::integral_constant<DType, DType::Q8_0>());
            return true;
        case DType::Q4_K:
            f(std::integral_constant<DType, DType::Q4_K>());
            return true;
        case DType::Q5_K:
            f(std::integral_constant<DType, DType::Q5_K>());
            return true;
        case DType::Q6_K:
            f(std::integral_constant<DType, DType::Q6_K>());
            return true;
        default:
            return false;
    }
}

// Plain types, element i of a row.
template <DType T>
__device__ __forceinline__ float plain_at(const uint8_t* row, size_t i);
template <>
__device__ __forceinline__ float plain_at<DType::F32>(const uint8_t* row, size_t i) {
    return reinterpret_cast<const float*>(row)[i];
}
template <>
__device__ __forceinline__ float plain_at<DType::F16>(const uint8_t* row, size_t i) {
    return __half2float(reinterpret_cast<const __half*>(row)[i]);
}
template <>
__device__ __forceinline__ float plain_at<DType::BF16>(const uint8_t* row, size_t i) {
    return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
}

}  // namespace cuda
}  // namespace cactus
