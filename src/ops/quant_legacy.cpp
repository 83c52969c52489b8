// Scalar reference kernels of the 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
// Quantizers round exactly as ggml's *_ref functions; dot products sum integers per block.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace cactus {
namespace ref {

namespace {

// The element with the largest magnitude (its sign kept), first one on ties.
float signed_absmax(const float* x, size_t n) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void min_max(const float* x, size_t n, float* min, float* max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (size_t j = 0; j < n; ++j) {
        *min = std::min(*min, x[j]);
        *max = std::max(*max, x[j]);
    }
}

uint32_t load_qh(const uint8_t* qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof(v));
    return v;
}

// The 5-bit values (0..31) of a Q5 block: low nibbles from qs, fifth bits from qh.
void unpack_q5(const uint8_t* qs, uint32_t qh, int* low_half, int* high_half) {
    for (size_t j = 0; j < kQK32 / 2; ++j) {
        low_half[j] = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
        high_half[j] = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
    }
}

}  // namespace

// ---- dequantize ----------------------------------------------------------------------------------

void dequantize_row_q4_0(float* dst, const void* src, size_t n) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            dst[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
            dst[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(float* dst, const void* src, size_t n) {
    const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            dst[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
            dst[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_row_q5_0(float* dst, const void* src, size_t n) {
    const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
    int lo[16], hi[16];
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        unpack_q5(b[i].qs, load_qh(b[i].qh), lo, hi);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            dst[j] = static_cast<float>(lo[j] - 16) * d;
            dst[j + 16] = static_cast<float>(hi[j] - 16) * d;
        }
    }
}

void dequantize_row_q5_1(float* dst, const void* src, size_t n) {
    const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
    int lo[16], hi[16];
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        unpack_q5(b[i].qs, load_qh(b[i].qh), lo, hi);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            dst[j] = static_cast<float>(lo[j]) * d + m;
            dst[j + 16] = static_cast<float>(hi[j]) * d + m;
        }
    }
}

void dequantize_row_q8_0(float* dst, const void* src, size_t n) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        for (size_t j = 0; j < kQK32; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

void dequantize_row_q8_1(float* dst, const void* src, size_t n) {
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
    for (size_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
        const float d = fp16_to_fp32(b[i].d);
        for (size_t j = 0; j < kQK32; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

// ---- quantize ------------------------------------------------------------------------------------

void quantize_row_q4_0(void* dst, const float* src, size_t n) {
    BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        const float d = signed_absmax(src, kQK32) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
            const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 8.5f)));
            b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

void quantize_row_q4_1(void* dst, const float* src, size_t n) {
    BlockQ4_1* b = static_cast<BlockQ4_1*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        float min, max;
        min_max(src, kQK32, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        b[i].m = fp32_to_fp16(min);
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            const int lo = std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - min) * id + 0.5f)));
            const int hi = std::min(15, static_cast<int>(static_cast<int8_t>((src[j + 16] - min) * id + 0.5f)));
            b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

void quantize_row_q5_0(void* dst, const float* src, size_t n) {
    BlockQ5_0* b = static_cast<BlockQ5_0*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        const float d = signed_absmax(src, kQK32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            const int lo = std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f)));
            const int hi = std::min(31, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 16.5f)));
            b[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= ((static_cast<uint32_t>(lo) & 0x10u) >> 4) << j;
            qh |= ((static_cast<uint32_t>(hi) & 0x10u) >> 4) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, sizeof(qh));
    }
}

void quantize_row_q5_1(void* dst, const float* src, size_t n) {
    BlockQ5_1* b = static_cast<BlockQ5_1*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        float min, max;
        min_max(src, kQK32, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        b[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            const int lo = std::min(31, static_cast<int>(static_cast<uint8_t>((src[j] - min) * id + 0.5f)));
            const int hi = std::min(31, static_cast<int>(static_cast<uint8_t>((src[j + 16] - min) * id + 0.5f)));
            b[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= ((static_cast<uint32_t>(lo) & 0x10u) >> 4) << j;
            qh |= ((static_cast<uint32_t>(hi) & 0x10u) >> 4) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, sizeof(qh));
    }
}

// Q8_0 / Q8_1: d = max|x| / 127, q = round(x / d) with ties away from zero (roundf), as ggml.
void quantize_row_q8_0(void* dst, const float* src, size_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        float amax = 0.0f;
        for (size_t j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(src[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (size_t j = 0; j < kQK32; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
    }
}

void quantize_row_q8_1(void* dst, const float* src, size_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i, src += kQK32) {
        float amax = 0.0f;
        for (size_t j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(src[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (size_t j = 0; j < kQK32; ++j) {
            b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
            sum += b[i].qs[j];
        }
        b[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

// ---- dot products --------------------------------------------------------------------------------

float vec_dot_q4_0(const void* w, const void* x, size_t n) {
    const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQK32; ++i) {
        int sumi = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            sumi += ((a[i].qs[j] & 0x0F) - 8) * b[i].qs[j];
            sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d));
    }
    return sum;
}

float vec_dot_q4_1(const void* w, const void* x, size_t n) {
    const BlockQ4_1* a = static_cast<const BlockQ4_1*>(w);
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQK32; ++i) {
        int sumi = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            sumi += (a[i].qs[j] & 0x0F) * b[i].qs[j];
            sumi += (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d)) +
               fp16_to_fp32(a[i].m) * fp16_to_fp32(b[i].s);
    }
    return sum;
}

float vec_dot_q5_0(const void* w, const void* x, size_t n) {
    const BlockQ5_0* a = static_cast<const BlockQ5_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    float sum = 0.0f;
    int lo[16], hi[16];
    for (size_t i = 0; i < n / kQK32; ++i) {
        unpack_q5(a[i].qs, load_qh(a[i].qh), lo, hi);
        int sumi = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) {
            sumi += (lo[j] - 16) * b[i].qs[j] + (hi[j] - 16) * b[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d));
    }
    return sum;
}

float vec_dot_q5_1(const void* w, const void* x, size_t n) {
    const BlockQ5_1* a = static_cast<const BlockQ5_1*>(w);
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
    float sum = 0.0f;
    int lo[16], hi[16];
    for (size_t i = 0; i < n / kQK32; ++i) {
        unpack_q5(a[i].qs, load_qh(a[i].qh), lo, hi);
        int sumi = 0;
        for (size_t j = 0; j < kQK32 / 2; ++j) sumi += lo[j] * b[i].qs[j] + hi[j] * b[i].qs[j + 16];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d)) +
               fp16_to_fp32(a[i].m) * fp16_to_fp32(b[i].s);
    }
    return sum;
}

float vec_dot_q8_0(const void* w, const void* x, size_t n) {
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQK32; ++i) {
        int sumi = 0;
        for (size_t j = 0; j < kQK32; ++j) sumi += a[i].qs[j] * b[i].qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d));
    }
    return sum;
}

}  // namespace ref
}  // namespace cactus
