// Scalar reference kernels of the K-quants (256-element super-blocks): Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K and the activation format Q8_K. Dequantizers follow ggml's arithmetic order exactly; dot
// products sum integers per super-block, then scale once. The weight quantizers are simple
// round-to-nearest ones (for tests); Q8_K rounds exactly as ggml's quantize_row_q8_K_ref.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace cactus {
namespace ref {

namespace {

// ---- unpacking: quant values in element order ----------------------------------------------------

void unpack_q2_k(const BlockQ2_K& b, uint8_t* q /* [256], 0..3 */) {
    for (size_t half = 0; half < 2; ++half) {
        for (size_t shift = 0; shift < 4; ++shift) {
            for (size_t l = 0; l < 32; ++l) {
                q[half * 128 + shift * 32 + l] = (b.qs[half * 32 + l] >> (2 * shift)) & 3;
            }
        }
    }
}

void unpack_q3_k(const BlockQ3_K& b, int8_t* q /* [256], -4..3 */, int8_t* scales /* [16] */) {
    for (size_t half = 0; half < 2; ++half) {
        for (size_t shift = 0; shift < 4; ++shift) {
            const uint8_t hbit = static_cast<uint8_t>(1u << (half * 4 + shift));
            for (size_t l = 0; l < 32; ++l) {
                const int low = (b.qs[half * 32 + l] >> (2 * shift)) & 3;
                q[half * 128 + shift * 32 + l] = static_cast<int8_t>(low - ((b.hmask[l] & hbit) ? 0 : 4));
            }
        }
    }
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
        const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
}

void unpack_q4_k(const BlockQ4_K& b, uint8_t* q /* [256], 0..15 */) {
    for (size_t chunk = 0; chunk < 4; ++chunk) {
        for (size_t l = 0; l < 32; ++l) {
            q[chunk * 64 + l] = b.qs[chunk * 32 + l] & 0xF;
            q[chunk * 64 + 32 + l] = b.qs[chunk * 32 + l] >> 4;
        }
    }
}

void unpack_q5_k(const BlockQ5_K& b, uint8_t* q /* [256], 0..31 */) {
    for (size_t chunk = 0; chunk < 4; ++chunk) {
        const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * chunk));
        const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * chunk));
        for (size_t l = 0; l < 32; ++l) {
            q[chunk * 64 + l] = (b.qs[chunk * 32 + l] & 0xF) | ((b.qh[l] & bit_lo) ? 16 : 0);
            q[chunk * 64 + 32 + l] = (b.qs[chunk * 32 + l] >> 4) | ((b.qh[l] & bit_hi) ? 16 : 0);
        }
    }
}

void unpack_q6_k(const BlockQ6_K& b, int8_t* q /* [256], -32..31 */) {
    for (size_t half = 0; half < 2; ++half) {
        const uint8_t* ql = b.ql + half * 64;
        const uint8_t* qh = b.qh + half * 32;
        int8_t* out = q + half * 128;
        for (size_t l = 0; l < 32; ++l) {
            out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

template <typename A, typename B>
int int_dot(const A* a, const B* b, size_t n) {
    int sum = 0;
    for (size_t i = 0; i < n; ++i) sum += static_cast<int>(a[i]) * static_cast<int>(b[i]);
    return sum;
}

}  // namespace

// ---- dequantize ----------------------------------------------------------------------------------

void dequantize_row_q2_k(float* dst, const void* src, size_t n) {
    const BlockQ2_K* blocks = static_cast<const BlockQ2_K*>(src);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        const float d = fp16_to_fp32(blocks[i].d);
        const float dmin = fp16_to_fp32(blocks[i].dmin);
        unpack_q2_k(blocks[i], q);
        for (size_t j = 0; j < 16; ++j) {
            const uint8_t sc = blocks[i].scales[j];
            const float dl = d * static_cast<float>(sc & 0xF);
            const float ml = dmin * static_cast<float>(sc >> 4);
            for (size_t l = 0; l < 16; ++l) dst[j * 16 + l] = dl * static_cast<float>(q[j * 16 + l]) - ml;
        }
    }
}

void dequantize_row_q3_k(float* dst, const void* src, size_t n) {
    const BlockQ3_K* blocks = static_cast<const BlockQ3_K*>(src);
    int8_t q[kQKK], scales[16];
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        const float d = fp16_to_fp32(blocks[i].d);
        unpack_q3_k(blocks[i], q, scales);
        for (size_t j = 0; j < 16; ++j) {
            const float dl = d * static_cast<float>(scales[j]);
            for (size_t l = 0; l < 16; ++l) dst[j * 16 + l] = dl * static_cast<float>(q[j * 16 + l]);
        }
    }
}

void dequantize_row_q4_k(float* dst, const void* src, size_t n) {
    const BlockQ4_K* blocks = static_cast<const BlockQ4_K*>(src);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        const float d = fp16_to_fp32(blocks[i].d);
        const float dmin = fp16_to_fp32(blocks[i].dmin);
        unpack_q4_k(blocks[i], q);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            unpack_k_scale_min(blocks[i].scales, j, &sc, &m);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(m);
            for (size_t l = 0; l < 32; ++l) dst[j * 32 + l] = dl * static_cast<float>(q[j * 32 + l]) - ml;
        }
    }
}

void dequantize_row_q5_k(float* dst, const void* src, size_t n) {
    const BlockQ5_K* blocks = static_cast<const BlockQ5_K*>(src);
    uint8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        const float d = fp16_to_fp32(blocks[i].d);
        const float dmin = fp16_to_fp32(blocks[i].dmin);
        unpack_q5_k(blocks[i], q);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            unpack_k_scale_min(blocks[i].scales, j, &sc, &m);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(m);
            for (size_t l = 0; l < 32; ++l) dst[j * 32 + l] = dl * static_cast<float>(q[j * 32 + l]) - ml;
        }
    }
}

void dequantize_row_q6_k(float* dst, const void* src, size_t n) {
    const BlockQ6_K* blocks = static_cast<const BlockQ6_K*>(src);
    int8_t q[kQKK];
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        const float d = fp16_to_fp32(blocks[i].d);
        unpack_q6_k(blocks[i], q);
        for (size_t j = 0; j < 16; ++j) {
            const float dl = d * static_cast<float>(blocks[i].scales[j]);
            for (size_t l = 0; l < 16; ++l) dst[j * 16 + l] = dl * static_cast<float>(q[j * 16 + l]);
        }
    }
}

void dequantize_row_q8_k(float* dst, const void* src, size_t n) {
    const BlockQ8_K* blocks = static_cast<const BlockQ8_K*>(src);
    for (size_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
        for (size_t j = 0; j < kQKK; ++j) dst[j] = blocks[i].d * static_cast<float>(blocks[i].qs[j]);
    }
}

// ---- dot products with Q8_K activations ----------------------------------------------------------

float vec_dot_q2_k(const void* w, const void* x, size_t n) {
    const BlockQ2_K* a = static_cast<const BlockQ2_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    uint8_t q[kQKK];
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        unpack_q2_k(a[i], q);
        int scaled = 0, mins = 0;
        for (size_t j = 0; j < 16; ++j) {
            scaled += (a[i].scales[j] & 0xF) * int_dot(q + j * 16, b[i].qs + j * 16, 16);
            mins += (a[i].scales[j] >> 4) * b[i].bsums[j];
        }
        sum += b[i].d * fp16_to_fp32(a[i].d) * static_cast<float>(scaled) -
               b[i].d * fp16_to_fp32(a[i].dmin) * static_cast<float>(mins);
    }
    return sum;
}

float vec_dot_q3_k(const void* w, const void* x, size_t n) {
    const BlockQ3_K* a = static_cast<const BlockQ3_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    int8_t q[kQKK], scales[16];
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        unpack_q3_k(a[i], q, scales);
        int scaled = 0;
        for (size_t j = 0; j < 16; ++j) scaled += scales[j] * int_dot(q + j * 16, b[i].qs + j * 16, 16);
        sum += b[i].d * fp16_to_fp32(a[i].d) * static_cast<float>(scaled);
    }
    return sum;
}

namespace {

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins.
template <typename Block>
float k_scale_min_block_dot(const Block& a, const BlockQ8_K& b, const uint8_t* q) {
    int scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        unpack_k_scale_min(a.scales, j, &sc, &m);
        scaled += sc * int_dot(q + j * 32, b.qs + j * 32, 32);
        mins += m * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
    }
    return b.d * fp16_to_fp32(a.d) * static_cast<float>(scaled) - b.d * fp16_to_fp32(a.dmin) * static_cast<float>(mins);
}

}  // namespace

float vec_dot_q4_k(const void* w, const void* x, size_t n) {
    const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    uint8_t q[kQKK];
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        unpack_q4_k(a[i], q);
        sum += k_scale_min_block_dot(a[i], b[i], q);
    }
    return sum;
}

float vec_dot_q5_k(const void* w, const void* x, size_t n) {
    const BlockQ5_K* a = static_cast<const BlockQ5_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    uint8_t q[kQKK];
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        unpack_q5_k(a[i], q);
        sum += k_scale_min_block_dot(a[i], b[i], q);
    }
    return sum;
}

float vec_dot_q6_k(const void* w, const void* x, size_t n) {
    const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    int8_t q[kQKK];
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        unpack_q6_k(a[i], q);
        int scaled = 0;
        for (size_t j = 0; j < 16; ++j) scaled += a[i].scales[j] * int_dot(q + j * 16, b[i].qs + j * 16, 16);
        sum += b[i].d * fp16_to_fp32(a[i].d) * static_cast<float>(scaled);
    }
    return sum;
}

// ---- Q8_K activations (exactly ggml's quantize_row_q8_K_ref) -------------------------------------

void quantize_row_q8_k(void* dst, const float* src, size_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        float amax = 0.0f, max = 0.0f;
        for (size_t j = 0; j < kQKK; ++j) {
            if (std::fabs(src[j]) > amax) {
                amax = std::fabs(src[j]);
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&b[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        const float iscale = -127.0f / max;
        for (size_t j = 0; j < kQKK; ++j) {
            b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[j])));
        }
        for (size_t j = 0; j < kQKK / 16; ++j) {
            int sum = 0;
            for (size_t l = 0; l < 16; ++l) sum += b[i].qs[j * 16 + l];
            b[i].bsums[j] = static_cast<int16_t>(sum);
        }
        b[i].d = 1.0f / iscale;
    }
}

}  // namespace ref
}  // namespace cactus
