// Simple round-to-nearest quantizers of the K-quant weight formats. They exist so tests can make
// valid blocks from float data; they do not search for optimal scales as ggml's converters do.
// Every sub-block scale is itself quantized, and the element quants use the rounded scales.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace cactus {
namespace ref {

namespace {

int clamp_int(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// Quantizes x / step to the nearest integer in [lo, hi]; a zero step gives `zero`.
int quantize_value(float x, float step, int lo, int hi, int zero) {
    if (step == 0.0f) return zero;
    return clamp_int(nearest_int(x / step), lo, hi);
}

float signed_absmax(const float* x, size_t n) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

// Asymmetric sub-blocks: scale[j] = (max - min) / levels, offset[j] = -min (min clipped to <= 0).
void asymmetric_ranges(const float* x, size_t n_sub, size_t sub_len, int levels, float* scale, float* offset) {
    for (size_t j = 0; j < n_sub; ++j) {
        const float* s = x + j * sub_len;
        const float lo = std::min(0.0f, *std::min_element(s, s + sub_len));
        const float hi = *std::max_element(s, s + sub_len);
        scale[j] = (hi - lo) / static_cast<float>(levels);
        offset[j] = -lo;
    }
}

// Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scales and mins packed into 12 bytes; levels 15 or 31.
template <typename Block>
void quantize_k_scale_min(Block& b, const float* x, int levels, uint8_t* q /* [256] */) {
    float scale[8], offset[8];
    asymmetric_ranges(x, 8, 32, levels, scale, offset);
    const float d = fp16_to_fp32(fp32_to_fp16(*std::max_element(scale, scale + 8) / 63.0f));
    const float dmin = fp16_to_fp32(fp32_to_fp16(*std::max_element(offset, offset + 8) / 63.0f));
    b.d = fp32_to_fp16(d);
    b.dmin = fp32_to_fp16(dmin);
    std::memset(b.scales, 0, sizeof(b.scales));
    for (int j = 0; j < 8; ++j) {
        const int ls = quantize_value(scale[j], d, 0, 63, 0);
        const int lm = quantize_value(offset[j], dmin, 0, 63, 0);
        if (j < 4) {
            b.scales[j] = static_cast<uint8_t>(ls);
            b.scales[j + 4] = static_cast<uint8_t>(lm);
        } else {
            b.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            b.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            b.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
        const float step = d * static_cast<float>(ls);
        const float shift = dmin * static_cast<float>(lm);
        for (size_t l = 0; l < 32; ++l) {
            q[j * 32 + l] = static_cast<uint8_t>(quantize_value(x[j * 32 + l] + shift, step, 0, levels, 0));
        }
    }
}

}  // namespace

void quantize_row_q2_k(void* dst, const float* src, size_t n) {
    BlockQ2_K* blocks = static_cast<BlockQ2_K*>(dst);
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        BlockQ2_K& b = blocks[i];
        float scale[16], offset[16];
        asymmetric_ranges(src, 16, 16, 3, scale, offset);
        const float d = fp16_to_fp32(fp32_to_fp16(*std::max_element(scale, scale + 16) / 15.0f));
        const float dmin = fp16_to_fp32(fp32_to_fp16(*std::max_element(offset, offset + 16) / 15.0f));
        b.d = fp32_to_fp16(d);
        b.dmin = fp32_to_fp16(dmin);
        uint8_t q[kQKK];
        for (size_t j = 0; j < 16; ++j) {
            const int ls = quantize_value(scale[j], d, 0, 15, 0);
            const int lm = quantize_value(offset[j], dmin, 0, 15, 0);
            b.scales[j] = static_cast<uint8_t>(ls | (lm << 4));
            const float step = d * static_cast<float>(ls), shift = dmin * static_cast<float>(lm);
            for (size_t l = 0; l < 16; ++l) {
                q[j * 16 + l] = static_cast<uint8_t>(quantize_value(src[j * 16 + l] + shift, step, 0, 3, 0));
            }
        }
        // element e of a 128-half sits in byte e % 32 at bit pair e / 32
        std::memset(b.qs, 0, sizeof(b.qs));
        for (size_t e = 0; e < kQKK; ++e) {
            b.qs[(e / 128) * 32 + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e % 128) / 32)));
        }
    }
}

void quantize_row_q3_k(void* dst, const float* src, size_t n) {
    BlockQ3_K* blocks = static_cast<BlockQ3_K*>(dst);
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        BlockQ3_K& b = blocks[i];
        float scale[16], amax = 0.0f;
        for (size_t j = 0; j < 16; ++j) {
            scale[j] = signed_absmax(src + j * 16, 16) / -4.0f;
            amax = std::max(amax, std::fabs(scale[j]));
        }
        const float d = fp16_to_fp32(fp32_to_fp16(amax / 31.0f));
        b.d = fp32_to_fp16(d);
        std::memset(b.scales, 0, sizeof(b.scales));
        std::memset(b.hmask, 0, sizeof(b.hmask));
        std::memset(b.qs, 0, sizeof(b.qs));
        for (int j = 0; j < 16; ++j) {
            const int ls = quantize_value(scale[j], d, -32, 31, 0);
            const int stored = ls + 32;
            if (j < 8)
                b.scales[j] = static_cast<uint8_t>(stored & 0xF);
            else
                b.scales[j - 8] |= static_cast<uint8_t>((stored & 0xF) << 4);
            b.scales[8 + j % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (j / 4)));
            const float step = d * static_cast<float>(ls);
            for (size_t l = 0; l < 16; ++l) {
                const size_t e = static_cast<size_t>(j) * 16 + l;
                const int v = quantize_value(src[e], step, -4, 3, 0) + 4;  // 0..7
                const size_t group = e / 32;                               // bit pair (e % 128) / 32 of half e / 128
                b.qs[(e / 128) * 32 + e % 32] |= static_cast<uint8_t>((v & 3) << (2 * (group % 4)));
                if (v & 4) b.hmask[e % 32] |= static_cast<uint8_t>(1u << group);
            }
        }
    }
}

void quantize_row_q4_k(void* dst, const float* src, size_t n) {
    BlockQ4_K* blocks = static_cast<BlockQ4_K*>(dst);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        quantize_k_scale_min(blocks[i], src, 15, q);
        for (size_t chunk = 0; chunk < 4; ++chunk) {
            for (size_t l = 0; l < 32; ++l) {
                blocks[i].qs[chunk * 32 + l] = static_cast<uint8_t>(q[chunk * 64 + l] | (q[chunk * 64 + 32 + l] << 4));
            }
        }
    }
}

void quantize_row_q5_k(void* dst, const float* src, size_t n) {
    BlockQ5_K* blocks = static_cast<BlockQ5_K*>(dst);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        BlockQ5_K& b = blocks[i];
        quantize_k_scale_min(b, src, 31, q);
        std::memset(b.qh, 0, sizeof(b.qh));
        for (size_t chunk = 0; chunk < 4; ++chunk) {
            for (size_t l = 0; l < 32; ++l) {
                const uint8_t lo = q[chunk * 64 + l], hi = q[chunk * 64 + 32 + l];
                b.qs[chunk * 32 + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
                if (lo & 16) b.qh[l] |= static_cast<uint8_t>(1u << (2 * chunk));
                if (hi & 16) b.qh[l] |= static_cast<uint8_t>(2u << (2 * chunk));
            }
        }
    }
}

void quantize_row_q6_k(void* dst, const float* src, size_t n) {
    BlockQ6_K* blocks = static_cast<BlockQ6_K*>(dst);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        BlockQ6_K& b = blocks[i];
        float scale[16], amax = 0.0f;
        for (size_t j = 0; j < 16; ++j) {
            scale[j] = signed_absmax(src + j * 16, 16) / -32.0f;
            amax = std::max(amax, std::fabs(scale[j]));
        }
        const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
        b.d = fp32_to_fp16(d);
        for (size_t j = 0; j < 16; ++j) {
            const int ls = quantize_value(scale[j], d, -127, 127, 0);
            b.scales[j] = static_cast<int8_t>(ls);
            const float step = d * static_cast<float>(ls);
            for (size_t l = 0; l < 16; ++l) {
                q[j * 16 + l] = static_cast<uint8_t>(quantize_value(src[j * 16 + l], step, -32, 31, 0) + 32);
            }
        }
        for (size_t half = 0; half < 2; ++half) {
            const uint8_t* v = q + half * 128;
            uint8_t* ql = b.ql + half * 64;
            uint8_t* qh = b.qh + half * 32;
            for (size_t l = 0; l < 32; ++l) {
                ql[l] = static_cast<uint8_t>((v[l] & 0xF) | ((v[l + 64] & 0xF) << 4));
                ql[l + 32] = static_cast<uint8_t>((v[l + 32] & 0xF) | ((v[l + 96] & 0xF) << 4));
                qh[l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                             ((v[l + 96] >> 4) << 6));
            }
        }
    }
}

}  // namespace ref
}  // namespace cactus
