// Prompt products as tiled int8 tensor-core products, after llama.cpp's mmq. Two launches:
//  1. round x once per product into int8 blocks in the CPU's vec_dot_type layout (Q8_0 / Q8_1
//     blocks of 32 for the legacy formats, Q8_K blocks of 256 for the K-quants), with each 32-block's
//     scale d and the term its weights' minimum multiplies (Q8_1: f16(d * sum q); Q8_K: d * sum q);
//  2. per block of 128 threads, a 64-row x 64-token tile of y (or of 256 threads, 64 x 128: see
//     tile_tokens): each 256-element step unpacks the weights' quants to int8 in shared memory (one
//     32-element block per item), copies the rounded activations beside them, and every warp
//     multiplies its 32 x 32 sub-tile with mma.sync.m16n8k16 s8 x s8 -> s32. Each 16-element
//     (Q6_K) or 32-element int32 sum is then scaled as the CPU's vec_dot scales its block:
//     d_w * d_x * isum, plus m_w * s_x for the weights with a minimum (K-quants:
//     -dmin * m_j * d_x * sum_j(q)). The result equals the CPU's up to float summation order.
// F16 / BF16 / F32 weights take the 64 x 64 tiles on the tf32 tensor cores (mmf_kernel, below).
// Launchers: cuda_mmq.h.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_mmq.h"
#include "backends/cuda/cuda_quant.cuh"
#include "core/error.h"
#include "ops/quant_blocks.h"

namespace cactus {
namespace cuda {

namespace {

constexpr int kTileRows = 64;                // weight rows of a block
constexpr int kNarrowTokens = 64;            // tokens of a block: 4 warps, 2 x 2 sub-tiles of 32 x 32
constexpr int kWideTokens = 128;             // mmq only: 8 warps, 2 (rows) x 4 (tokens) sub-tiles
constexpr int kTileK = 256;                  // elements of one step
constexpr int kGroups = kTileK / 32;         // 32-element blocks of one step
constexpr int kRowBytes = kTileK + 16;       // shared row stride: the fragment loads hit 32 banks
constexpr int kQuantThreads = 256;           // rounding kernel
constexpr size_t kMaxElements = 1ull << 31;  // int indexing of x and the scratch
constexpr size_t kMaxGridY = 65535;          // token tiles of one launch
constexpr size_t kStaticShared = 48 * 1024;  // more than this per block must be dynamic, opted into

// Threads of a block whose tile is kTileRows x `tokens`: a warp per 32 x 32 sub-tile.
__host__ __device__ constexpr int tile_threads(int tokens) { return (kTileRows / 32) * (tokens / 32) * 32; }
constexpr int kFloatThreads = tile_threads(kNarrowTokens);  // mmf_kernel

// ---- weights: one 32-element block into int8 --------------------------------------------------------
// Unpack<T>::run(row, g, q, d, m): block g of a row (K-quants: sub-block g % 8 of super-block g / 8)
// into 32 int8 values q as the CPU's integer dot product uses them, d[0..1] the scales of elements
// 0-15 and 16-31 (equal unless Q6_K), m the factor of the activation's minimum term (0 if none).

__device__ __forceinline__ uint32_t pack4(int a, int b, int c, int d) {
    return (static_cast<uint32_t>(a) & 0xFFu) | ((static_cast<uint32_t>(b) & 0xFFu) << 8) |
           ((static_cast<uint32_t>(c) & 0xFFu) << 16) | ((static_cast<uint32_t>(d) & 0xFFu) << 24);
}

template <DType T>
struct Unpack;

// Four bytes at p as one little-endian word, read as whole words: p is a multiple of kAlign (4, or
// 2 for the blocks of even size: two 16-bit loads). mmq() checks the row alignment it relies on.
template <int kAlign>
__device__ __forceinline__ uint32_t load_word(const uint8_t* p) {
    if constexpr (kAlign >= 4) {
        return *reinterpret_cast<const uint32_t*>(p);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
        return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
    }
}

// Bits 0..3 of `bits` to bit 4 of bytes 0..3 (the fifth bits of four 5-bit quants).
__device__ __forceinline__ uint32_t fifth_bits(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// Q4_0 / Q4_1 / Q5_0 / Q5_1: f16 d, f16 m (the types with a minimum), the fifth bits qh (5-bit
// types: element j's is bit j), then 16 bytes of nibbles (element j < 16: low nibble of byte j; else
// high of j - 16). The types without a minimum centre their quants: q - 2^(kBits - 1), byte-wise.
template <int kBits, bool kHasMin>
struct UnpackLegacy {
    static constexpr int kScaleBytes = kHasMin ? 4 : 2;
    static constexpr int kHighBytes = kBits == 5 ? 4 : 0;
    static constexpr int kQK = 32, kBytes = kScaleBytes + kHighBytes + 16;
    static constexpr int kAlign = kBytes % 4 == 0 ? 4 : 2;
    static constexpr uint32_t kOffset = kHasMin ? 0u : 0x01010101u << (kBits - 1);
    static __device__ void run(const uint8_t* row, int g, uint32_t* q, float* d, float* m) {
        const uint8_t* b = row + g * kBytes;
        d[0] = d[1] = h2f(b);
        *m = kHasMin ? h2f(b + 2) : 0.0f;
        const uint32_t qh = kBits == 5 ? load_word<kAlign>(b + kScaleBytes) : 0u;
        const uint8_t* qs = b + kScaleBytes + kHighBytes;
#pragma unroll
        for (int w = 0; w < 4; ++w) {  // elements 4w.. (low nibbles) and 16 + 4w.. (high)
            const uint32_t v = load_word<kAlign>(qs + 4 * w);
            uint32_t lo = v & kLowNibbles, hi = (v >> 4) & kLowNibbles;
            if constexpr (kBits == 5) {
                lo |= fifth_bits(qh >> (4 * w));
                hi |= fifth_bits(qh >> (4 * w + 16));
            }
            q[w] = __vsub4(lo, kOffset);
            q[w + 4] = __vsub4(hi, kOffset);
        }
    }
};

template <>
struct Unpack<DType::Q4_0> : UnpackLegacy<4, false> {};
template <>
struct Unpack<DType::Q4_1> : UnpackLegacy<4, true> {};
template <>
struct Unpack<DType::Q5_0> : UnpackLegacy<5, false> {};
template <>
struct Unpack<DType::Q5_1> : UnpackLegacy<5, true> {};
static_assert(Unpack<DType::Q4_0>::kBytes == sizeof(BlockQ4_0) && Unpack<DType::Q4_1>::kBytes == sizeof(BlockQ4_1) &&
                  Unpack<DType::Q5_0>::kBytes == sizeof(BlockQ5_0) && Unpack<DType::Q5_1>::kBytes == sizeof(BlockQ5_1),
              "UnpackLegacy's layouts are quant_blocks.h's");

template <>
struct Unpack<DType::Q8_0> {
    static constexpr int kQK = 32, kBytes = 34, kAlign = 2;
    static __device__ void run(const uint8_t* row, int g, uint32_t* q, float* d, float* m) {
        const uint8_t* b = row + g * kBytes;
        d[0] = d[1] = h2f(b);
        *m = 0.0f;
#pragma unroll
        for (int w = 0; w < 8; ++w) q[w] = load_word<kAlign>(b + 2 + 4 * w);
    }
};

// Q4_K / Q5_K sub-block j: 4-bit quants (plus a fifth bit) of scale d * sc_j and minimum dmin * m_j;
// the CPU subtracts dmin * d_x * sum_j m_j sum(q_x in j), so m = -dmin * m_j. Sub-blocks 2i and
// 2i + 1 share 32 bytes of quants: the low and the high nibbles.
template <>
struct Unpack<DType::Q4_K> {
    static constexpr int kQK = 256, kBytes = 144, kAlign = 4;
    static __device__ void run(const uint8_t* row, int g, uint32_t* q, float* d, float* m) {
        const uint8_t* b = row + (g >> 3) * kBytes;
        const int j = g & 7;
        int sc, mn;
        k_scale_min(j, b + 4, &sc, &mn);
        d[0] = d[1] = h2f(b) * static_cast<float>(sc);
        *m = -h2f(b + 2) * static_cast<float>(mn);
        const uint8_t* qs = b + 16 + (j >> 1) * 32;
        const int shift = 4 * (j & 1);
#pragma unroll
        for (int w = 0; w < 8; ++w) q[w] = (load_word<kAlign>(qs + 4 * w) >> shift) & kLowNibbles;
    }
};

// Q5_K: as Q4_K, and element l's fifth bit is bit j of qh[l].
template <>
struct Unpack<DType::Q5_K> {
    static constexpr int kQK = 256, kBytes = 176, kAlign = 4;
    static __device__ void run(const uint8_t* row, int g, uint32_t* q, float* d, float* m) {
        const uint8_t* b = row + (g >> 3) * kBytes;
        const int j = g & 7;
        int sc, mn;
        k_scale_min(j, b + 4, &sc, &mn);
        d[0] = d[1] = h2f(b) * static_cast<float>(sc);
        *m = -h2f(b + 2) * static_cast<float>(mn);
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + 48 + (j >> 1) * 32;
        const int shift = 4 * (j & 1);
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            const uint32_t lo = (load_word<kAlign>(qs + 4 * w) >> shift) & kLowNibbles;
            const uint32_t hi = ((load_word<kAlign>(qh + 4 * w) >> j) & 0x01010101u) << 4;
            q[w] = lo | hi;
        }
    }
};

// Q6_K chunk c of a super-block (blocks of 210 bytes): 6-bit quants - 32 with one scale per 16
// elements; the low four bits in ql (chunks k >= 2 of a half: the high nibbles), bits 4-5 in qh at
// bit 2k of each byte.
template <>
struct Unpack<DType::Q6_K> {
    static constexpr int kQK = 256, kBytes = 210, kAlign = 2;
    static __device__ void run(const uint8_t* row, int g, uint32_t* q, float* d, float* m) {
        const uint8_t* b = row + (g >> 3) * kBytes;
        const int cc = g & 7;
        const int half = cc >> 2;
        const int k = cc & 3;
        const uint8_t* ql = b + 64 * half + (k & 1) * 32;
        const uint8_t* qh = b + 128 + 32 * half;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half + 2 * k;
        const float dd = h2f(b + 208);
        d[0] = dd * static_cast<float>(sc[0]);
        d[1] = dd * static_cast<float>(sc[1]);
        *m = 0.0f;
        const int lshift = k >= 2 ? 4 : 0;
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            const uint32_t lo = (load_word<kAlign>(ql + 4 * w) >> lshift) & kLowNibbles;
            const uint32_t hi = ((load_word<kAlign>(qh + 4 * w) >> (2 * k)) & 0x03030303u) << 4;
            q[w] = __vsub4(lo | hi, 0x20202020u);
        }
    }
};

template <DType T>
__host__ __device__ constexpr bool is_k_quant() {
    return Unpack<T>::kQK == 256;
}

// Q6_K's 16-element halves carry their own scales: their int32 sums are scaled apart.
template <DType T>
__host__ __device__ constexpr bool split_halves() {
    return T == DType::Q6_K;
}

template <DType T>
__host__ __device__ constexpr bool has_min() {
    return T == DType::Q4_1 || T == DType::Q5_1 || T == DType::Q4_K || T == DType::Q5_K;
}

// ---- activations: x rounded once --------------------------------------------------------------------

__device__ __forceinline__ float f16_round(float v) { return __half2float(__float2half_rn(v)); }

// x [n, n_in] -> xq [n, n_in] int8, xd / xm [n, n_in / 32]. Legacy types (Q8_0 / Q8_1, cuda_gemv.cu's
// rounding): 8 threads per 32-block, xd = f16(d), xm = f16(d * sum q). K-quants (Q8_K): a warp per
// 256-block, xd = 1 / iscale in each of its 32-blocks, xm = xd * sum q of the 32-block. Every thread
// runs the shuffles (whole warps); threads past the end round zeros and store nothing.
template <bool K>
__global__ void __launch_bounds__(kQuantThreads)
    mmq_quantize_kernel(int8_t* xq, float* xd, float* xm, const float* x, int total) {
    pdl_start();
    const int i = static_cast<int>(blockIdx.x) * kQuantThreads + static_cast<int>(threadIdx.x);
    const bool active = i < total;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    if constexpr (!K) {  // thread i: elements 4i .. 4i+3
        float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (active) {
            const float4 v = *reinterpret_cast<const float4*>(x + static_cast<size_t>(i) * 4);
            f[0] = v.x;
            f[1] = v.y;
            f[2] = v.z;
            f[3] = v.w;
        }
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fabsf(f[j]));
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q[4];
        int sum = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            q[j] = static_cast<int>(roundf(f[j] * id));
            sum += q[j];
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (active) {
            reinterpret_cast<uint32_t*>(xq)[i] = pack4(q[0], q[1], q[2], q[3]);
            if ((i & 7) == 0) {
                xd[i >> 3] = f16_round(d);
                xm[i >> 3] = f16_round(static_cast<float>(sum) * d);
            }
        }
    } else {  // thread i: elements 8i .. 8i+7; a warp is one 256-block (total is a multiple of 32)
        float f[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) f[j] = 0.0f;
        if (active) {
            const float4* p = reinterpret_cast<const float4*>(x + static_cast<size_t>(i) * 8);
            const float4 a = p[0], b = p[1];
            f[0] = a.x;
            f[1] = a.y;
            f[2] = a.z;
            f[3] = a.w;
            f[4] = b.x;
            f[5] = b.y;
            f[6] = b.z;
            f[7] = b.w;
        }
        float amax = 0.0f, mx = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float a = fabsf(f[j]);
            if (a > amax) {
                amax = a;
                mx = f[j];
            }
        }
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {  // the first element wins ties, as in the CPU's loop
            const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
            const float om = __shfl_xor_sync(0xffffffffu, mx, o);
            if (oa > amax || (oa == amax && (lane ^ o) < lane)) {
                amax = oa;
                mx = om;
            }
        }
        const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
        const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
        int q[8];
        int sum = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            q[j] = static_cast<int>(fminf(127.0f, rintf(iscale * f[j])));
            sum += q[j];
        }
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);  // 4 lanes: 32 elements
        if (active) {
            uint32_t* out = reinterpret_cast<uint32_t*>(xq) + 2 * static_cast<size_t>(i);
            out[0] = pack4(q[0], q[1], q[2], q[3]);
            out[1] = pack4(q[4], q[5], q[6], q[7]);
            if ((i & 3) == 0) {
                xd[i >> 2] = d;
                xm[i >> 2] = d * static_cast<float>(sum);
            }
        }
    }
}

// ---- the tiled product --------------------------------------------------------------------------------

// d = a b + d for a 16 x 16 s8 tile a (row major) and a 16 x 8 s8 tile b (column major). PTX ISA
// "Matrix Fragments for mma.m16n8k16 with integer type": a0 holds row g, columns 4t .. 4t+3 and a1
// row g + 8, the same columns; b holds rows 4t .. 4t+3 of column g; d0, d1 are row g, columns 2t,
// 2t+1 and d2, d3 row g + 8 (g = lane / 4, t = lane % 4).
__device__ __forceinline__ void mma_s8(int* d, uint32_t a0, uint32_t a1, uint32_t b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b));
}

// 45,056 bytes for 64 tokens (static shared memory), 66,560 for 128 (dynamic: mmq_shared).
template <int kTokens>
struct MmqShared {
    alignas(16) int8_t wq[kTileRows][kRowBytes];  // weight quants of the step
    alignas(16) int8_t xq[kTokens][kRowBytes];    // rounded activations of the step
    float wd[kTileRows][2 * kGroups];             // scale per 16 weights
    float wm[kTileRows][kGroups];                 // minimum factor per 32 weights
    float xd[kTokens][kGroups];                   // activation scale per 32
    float xm[kTokens][kGroups];                   // activation minimum term per 32
};

// Dynamic shared bytes a launch of kTokens-token tiles passes: 0 where the tile fits statically.
template <int kTokens>
__host__ __device__ constexpr size_t mmq_dynamic_bytes() {
    return sizeof(MmqShared<kTokens>) <= kStaticShared ? 0 : sizeof(MmqShared<kTokens>);
}
static_assert(mmq_dynamic_bytes<kNarrowTokens>() == 0, "the 64-token tile keeps its static shared memory");

// The block's tile: a static variable where it fits in 48 KB, else the dynamic shared memory (its
// base is 16-byte aligned through the uint4 declaration, as the uint4 stores into wq / xq need).
template <int kTokens>
__device__ __forceinline__ MmqShared<kTokens>& mmq_shared() {
    if constexpr (mmq_dynamic_bytes<kTokens>() == 0) {
        __shared__ MmqShared<kTokens> sh;
        return sh;
    } else {
        extern __shared__ uint4 mmq_dynamic[];
        return *reinterpret_cast<MmqShared<kTokens>*>(mmq_dynamic);
    }
}

// Step k0 (elements k0 .. k0 + 255; groups [0, groups) of it valid) of rows row0.. into shared
// memory; rows past n_out are zeros.
template <DType T, int kTokens>
__device__ __forceinline__ void load_weights(MmqShared<kTokens>& sh, const uint8_t* w, size_t row_bytes, int row0,
                                             int n_out, int g0, int groups) {
    for (int it = static_cast<int>(threadIdx.x); it < kTileRows * kGroups; it += tile_threads(kTokens)) {
        const int r = it / kGroups;
        const int g = it % kGroups;
        if (g >= groups) continue;
        uint32_t q[8];
        float d[2], m;
        if (row0 + r < n_out) {
            Unpack<T>::run(w + static_cast<size_t>(row0 + r) * row_bytes, g0 + g, q, d, &m);
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) q[i] = 0;
            d[0] = d[1] = m = 0.0f;
        }
        uint4* dst = reinterpret_cast<uint4*>(&sh.wq[r][g * 32]);
        dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
        dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
        sh.wd[r][2 * g] = d[0];
        sh.wd[r][2 * g + 1] = d[1];
        sh.wm[r][g] = m;
    }
}

// Tokens tok0.. of the same step; tokens past n are zeros.
template <int kTokens>
__device__ __forceinline__ void load_activations(MmqShared<kTokens>& sh, const int8_t* xq, const float* xd,
                                                 const float* xm, int tok0, int n, int n_in, int g0, int groups) {
    constexpr int kParts = kTileK / 16;  // 16-byte parts of a token's step
    for (int it = static_cast<int>(threadIdx.x); it < kTokens * kParts; it += tile_threads(kTokens)) {
        const int t = it / kParts;
        const int p = it % kParts;
        if (p >= 2 * groups) continue;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (tok0 + t < n) {
            v = *reinterpret_cast<const uint4*>(xq + static_cast<size_t>(tok0 + t) * n_in + g0 * 32 + p * 16);
        }
        *reinterpret_cast<uint4*>(&sh.xq[t][p * 16]) = v;
    }
    const int scales = n_in / 32;
    for (int it = static_cast<int>(threadIdx.x); it < kTokens * kGroups; it += tile_threads(kTokens)) {
        const int t = it / kGroups;
        const int g = it % kGroups;
        if (g >= groups) continue;
        const bool live = tok0 + t < n;
        const size_t at = static_cast<size_t>(tok0 + t) * scales + g0 + g;
        sh.xd[t][g] = live ? xd[at] : 0.0f;
        sh.xm[t][g] = live ? xm[at] : 0.0f;
    }
}

// float(v) for |v| < 2^22 without the int-to-float conversion instruction, which issues at an
// eighth of the float rate (16 a clock per SM on sm_90) and was the tiled product's bottleneck: the
// bits of 1.5 * 2^23 + v are that float exactly, so one integer and one float add. Every int32 sum of
// a group is inside: 32 products of int8 values, |v| <= 32 * 127 * 127 < 2^19.
__device__ __forceinline__ float small_int_to_float(int v) {
    constexpr int kMagicBits = 0x4B400000;  // 12582912.0f = 1.5 * 2^23
    return __int_as_float(kMagicBits + v) - 12582912.0f;
}

// acc [2 row tiles][4 token tiles][4] += scaled sums of group g (half h, or both halves) of this warp's
// sub-tile: row r = wr + 16 i + lg (+ 8 for e >= 2), token c = wc + 8 j + 2 lt + (e & 1).
template <DType T, int kTokens>
__device__ __forceinline__ void scale_into(float (&acc)[2][4][4], const int (&c)[2][4][4], const MmqShared<kTokens>& sh,
                                           int wr, int wc, int lg, int lt, int g, int h, bool add_min) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int r0 = wr + 16 * i + lg;
        const float d0 = sh.wd[r0][2 * g + h], d1 = sh.wd[r0 + 8][2 * g + h];
        const float m0 = sh.wm[r0][g], m1 = sh.wm[r0 + 8][g];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c0 = wc + 8 * j + 2 * lt;
            const float x0 = sh.xd[c0][g], x1 = sh.xd[c0 + 1][g];
            float* a = acc[i][j];
            a[0] += d0 * x0 * small_int_to_float(c[i][j][0]);
            a[1] += d0 * x1 * small_int_to_float(c[i][j][1]);
            a[2] += d1 * x0 * small_int_to_float(c[i][j][2]);
            a[3] += d1 * x1 * small_int_to_float(c[i][j][3]);
            if (has_min<T>() && add_min) {
                const float s0 = sh.xm[c0][g], s1 = sh.xm[c0 + 1][g];
                a[0] += m0 * s0;
                a[1] += m0 * s1;
                a[2] += m1 * s0;
                a[3] += m1 * s1;
            }
        }
    }
}

// A tile of y [n, n_out] (blockIdx.x: 64 rows, blockIdx.y: kTokens tokens) from w [n_out rows of
// row_bytes] and x rounded (xq [n, n_in], xd / xm [n, n_in / 32]). Warp w owns rows wr = 32 (w % 2)
// and tokens wc = 32 (w / 2) of the tile. Barriers: after a step's loads (the warps read what others
// wrote) and before the next step's (nobody still reads the shared tiles).
template <DType T, int kTokens>
__global__ void __launch_bounds__(tile_threads(kTokens))
    mmq_kernel(float* y, const uint8_t* w, size_t row_bytes, const int8_t* xq, const float* xd, const float* xm, int n,
               int n_in, int n_out) {
    pdl_start();
    MmqShared<kTokens>& sh = mmq_shared<kTokens>();
    const int row0 = static_cast<int>(blockIdx.x) * kTileRows;
    const int tok0 = static_cast<int>(blockIdx.y) * kTokens;
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int lg = lane >> 2, lt = lane & 3;
    const int wr = 32 * (warp & 1), wc = 32 * (warp >> 1);
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    const int n_groups = n_in / 32;
    for (int g0 = 0; g0 < n_groups; g0 += kGroups) {  // block-uniform
        const int groups = min(kGroups, n_groups - g0);
        __syncthreads();
        load_weights<T, kTokens>(sh, w, row_bytes, row0, n_out, g0, groups);
        load_activations(sh, xq, xd, xm, tok0, n, n_in, g0, groups);
        __syncthreads();
        for (int g = 0; g < groups; ++g) {
            int c[2][4][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (h == 0 || split_halves<T>()) {
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j)
#pragma unroll
                            for (int e = 0; e < 4; ++e) c[i][j][e] = 0;
                }
                const int k = g * 32 + h * 16 + 4 * lt;
                uint32_t a[2][2], b[4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    a[i][0] = *reinterpret_cast<const uint32_t*>(&sh.wq[wr + 16 * i + lg][k]);
                    a[i][1] = *reinterpret_cast<const uint32_t*>(&sh.wq[wr + 16 * i + lg + 8][k]);
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) b[j] = *reinterpret_cast<const uint32_t*>(&sh.xq[wc + 8 * j + lg][k]);
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) mma_s8(c[i][j], a[i][0], a[i][1], b[j]);
                if (split_halves<T>()) {
                    scale_into<T, kTokens>(acc, c, sh, wr, wc, lg, lt, g, h, h == 1);
                } else if (h == 1) {
                    scale_into<T, kTokens>(acc, c, sh, wr, wc, lg, lt, g, 0, true);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = row0 + wr + 16 * i + lg + (e >= 2 ? 8 : 0);
                const int t = tok0 + wc + 8 * j + 2 * lt + (e & 1);
                if (r < n_out && t < n) y[static_cast<size_t>(t) * n_out + r] = acc[i][j][e];
            }
        }
    }
}

// ---- float weights: tf32 tensor cores with x split in two --------------------------------------------
// F16 and BF16 values are exact in tf32 (11 and 8 significant bits, f32's exponent range). x (and F32
// weights) are split v = hi + lo into two tf32 values, so a product is v_w (x_hi + x_lo) (F32: plus
// w_lo x_hi) with a relative error near 2^-22 per term, far below the f32 summation's.

constexpr int kFloatK = 32;                // elements of one step
constexpr int kFloatStride = kFloatK + 4;  // shared row stride in words: the fragment loads hit 32 banks

__device__ __forceinline__ uint32_t to_tf32(float v) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
    return r;
}

// d = a b + d for a 16 x 8 tf32 tile a (row major) and an 8 x 8 tile b (column major). PTX ISA
// "Matrix Fragments for mma.m16n8k8" (.tf32): a0 holds row g, column t; a1 row g + 8, column t;
// a2 row g, column t + 4; a3 row g + 8, column t + 4; b0 row t, column g; b1 row t + 4, column g;
// d as in mma_s8.
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, "
        "%2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

struct MmfShared {
    uint32_t wh[kTileRows][kFloatStride];  // tf32 weights of the step
    uint32_t wl[kTileRows][kFloatStride];  // F32 weights: what hi leaves
    uint32_t xh[kNarrowTokens][kFloatStride];
    uint32_t xl[kNarrowTokens][kFloatStride];
};

// v into hi (tf32(v)) and lo (tf32(v - hi); v - hi is exact in f32).
__device__ __forceinline__ void split_tf32(float v, uint32_t* hi, uint32_t* lo) {
    *hi = to_tf32(v);
    *lo = to_tf32(v - __uint_as_float(*hi));
}

// y [n, n_out] tile as mmq_kernel's (same warp sub-tiles, same barriers), over steps of 32 elements
// (n_in any size: elements past it are zeros).
template <DType T>
__global__ void __launch_bounds__(kFloatThreads)
    mmf_kernel(float* y, const uint8_t* w, size_t row_bytes, const float* x, int n, int n_in, int n_out) {
    pdl_start();
    __shared__ MmfShared sh;
    const int row0 = static_cast<int>(blockIdx.x) * kTileRows;
    const int tok0 = static_cast<int>(blockIdx.y) * kNarrowTokens;
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int lg = lane >> 2, lt = lane & 3;
    const int wr = 32 * (warp & 1), wc = 32 * (warp >> 1);
    constexpr bool kSplitW = T == DType::F32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    for (int k0 = 0; k0 < n_in; k0 += kFloatK) {  // block-uniform
        __syncthreads();
        for (int it = static_cast<int>(threadIdx.x); it < kTileRows * kFloatK; it += kFloatThreads) {
            const int r = it / kFloatK, k = it % kFloatK;
            const bool live = row0 + r < n_out && k0 + k < n_in;
            const float v = live ? plain_at<T>(w + static_cast<size_t>(row0 + r) * row_bytes, k0 + k) : 0.0f;
            uint32_t hi, lo;
            split_tf32(v, &hi, &lo);
            sh.wh[r][k] = hi;
            sh.wl[r][k] = lo;
        }
        for (int it = static_cast<int>(threadIdx.x); it < kNarrowTokens * kFloatK; it += kFloatThreads) {
            const int t = it / kFloatK, k = it % kFloatK;
            const bool live = tok0 + t < n && k0 + k < n_in;
            const float v = live ? x[static_cast<size_t>(tok0 + t) * n_in + k0 + k] : 0.0f;
            split_tf32(v, &sh.xh[t][k], &sh.xl[t][k]);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kFloatK; kk += 8) {
            uint32_t ah[2][4], al[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int r = wr + 16 * i + lg;
                ah[i][0] = sh.wh[r][kk + lt];
                ah[i][1] = sh.wh[r + 8][kk + lt];
                ah[i][2] = sh.wh[r][kk + lt + 4];
                ah[i][3] = sh.wh[r + 8][kk + lt + 4];
                if (kSplitW) {
                    al[i][0] = sh.wl[r][kk + lt];
                    al[i][1] = sh.wl[r + 8][kk + lt];
                    al[i][2] = sh.wl[r][kk + lt + 4];
                    al[i][3] = sh.wl[r + 8][kk + lt + 4];
                }
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int c = wc + 8 * j + lg;
                const uint32_t bh0 = sh.xh[c][kk + lt], bh1 = sh.xh[c][kk + lt + 4];
                const uint32_t bl0 = sh.xl[c][kk + lt], bl1 = sh.xl[c][kk + lt + 4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    if (kSplitW) mma_tf32(acc[i][j], al[i], bh0, bh1);
                    mma_tf32(acc[i][j], ah[i], bl0, bl1);
                    mma_tf32(acc[i][j], ah[i], bh0, bh1);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = row0 + wr + 16 * i + lg + (e >= 2 ? 8 : 0);
                const int t = tok0 + wc + 8 * j + 2 * lt + (e & 1);
                if (r < n_out && t < n) y[static_cast<size_t>(t) * n_out + r] = acc[i][j][e];
            }
        }
    }
}

size_t round16(size_t v) { return (v + 15) & ~static_cast<size_t>(15); }

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Token width of the integer tiles for y [n, n_out]: 64 unless CACTUS_CUDA_MMQ_TOKENS (tiling.tokens)
// asks for 128. A 128-token tile unpacks each weight step once per 128 tokens instead of 64 (half the
// unpacking and weight reads from L2) with half as many blocks; on an H100 at pp512 it measured
// 0.98x the 64-token tile on qwen2.5-coder-0.5b and 1.00x on -1.5b (the products taking it where
// the wide grid still gave 2 blocks per SM), so it is not the default. The width changes no result:
// every output element runs the same K loop and the same per-group scaling in both, so y is
// bit-identical (test: CudaMmq.TileWidthsAgreeBitForBit).
int tile_tokens(const MmqTiling& tiling) { return tiling.tokens != 0 ? tiling.tokens : kNarrowTokens; }

// The tiled product over x already rounded into xq / xd / xm; tiles over 48 KB opt into their
// dynamic shared memory first (every launch: the setting is per device).
template <DType T, int kTokens>
void launch_tiles(cudaStream_t s, float* y, const uint8_t* w, size_t row_bytes, const int8_t* xq, const float* xd,
                  const float* xm, size_t n, size_t n_in, size_t n_out) {
    constexpr size_t bytes = mmq_dynamic_bytes<kTokens>();
    if constexpr (bytes > 0) {
        const cudaError_t e = cudaFuncSetAttribute(mmq_kernel<T, kTokens>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(bytes));
        if (e != cudaSuccess) {
            fail("cuda mmq: shared memory of %zu bytes for %d-token tiles: %s", bytes, kTokens, cudaGetErrorString(e));
        }
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(n_out, kTileRows)), static_cast<unsigned>(ceil_div(n, kTokens)));
    run_kernel(s, mmq_kernel<T, kTokens>, grid, dim3(tile_threads(kTokens)), bytes, y, w, row_bytes, xq, xd, xm,
               static_cast<int>(n), static_cast<int>(n_in), static_cast<int>(n_out));
}

}  // namespace

bool mmq_supported(DType type) {
    return dispatch_quant(type, [](auto) {});
}

size_t mmq_scratch_bytes(size_t n, size_t n_in) {
    return round16(n * n_in) + 2 * round16(n * (n_in / 32) * sizeof(float));
}

bool mmq(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n, size_t n_in,
         size_t n_out, void* scratch, const MmqTiling& tiling) {
    if (tiling.tokens != 0 && tiling.tokens != kNarrowTokens && tiling.tokens != kWideTokens) {
        fail("cuda mmq: tiles of %d tokens (64 or 128, or 0 for the automatic choice)", tiling.tokens);
    }
    if (n == 0 || n_out == 0 || n_in == 0 || n * n_in >= kMaxElements || n_out >= (1u << 30)) return false;
    if (ceil_div(n, kNarrowTokens) > kMaxGridY) return false;
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(scratch) % 16 != 0) return false;
    int8_t* xq = static_cast<int8_t*>(scratch);
    float* xd = reinterpret_cast<float*>(static_cast<char*>(scratch) + round16(n * n_in));
    float* xm = reinterpret_cast<float*>(reinterpret_cast<char*>(xd) + round16(n * (n_in / 32) * sizeof(float)));
    bool ok = false;
    const bool known = dispatch_quant(type, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        if (n_in % Unpack<T>::kQK != 0) return;
        // The unpackers read whole 16- or 32-bit words of every row (load_word).
        if (reinterpret_cast<uintptr_t>(w) % Unpack<T>::kAlign != 0 || row_bytes % Unpack<T>::kAlign != 0) return;
        constexpr bool K = is_k_quant<T>();
        const int total = static_cast<int>(n * n_in / (K ? 8 : 4));
        run_kernel(s, mmq_quantize_kernel<K>, dim3((total + kQuantThreads - 1) / kQuantThreads), dim3(kQuantThreads), 0,
                   xq, xd, xm, x, total);
        const uint8_t* wb = static_cast<const uint8_t*>(w);
        if (tile_tokens(tiling) == kWideTokens) {
            launch_tiles<T, kWideTokens>(s, y, wb, row_bytes, xq, xd, xm, n, n_in, n_out);
        } else {
            launch_tiles<T, kNarrowTokens>(s, y, wb, row_bytes, xq, xd, xm, n, n_in, n_out);
        }
        ok = true;
    });
    if (!known || !ok) return false;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda mmq: kernel launch failed: %s", cudaGetErrorString(e));
    return true;
}

bool mmf_supported(DType type) { return type == DType::F16 || type == DType::BF16 || type == DType::F32; }

bool mmf(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n, size_t n_in,
         size_t n_out) {
    if (!mmf_supported(type) || n == 0 || n_out == 0 || n_in == 0 || n * n_in >= kMaxElements || n_out >= (1u << 30) ||
        n_in >= (1u << 30) || ceil_div(n, kNarrowTokens) > kMaxGridY) {
        return false;
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(n_out, kTileRows)),
                    static_cast<unsigned>(ceil_div(n, kNarrowTokens)));
    void (*kernel)(float*, const uint8_t*, size_t, const float*, int, int, int) =
        type == DType::F16    ? mmf_kernel<DType::F16>
        : type == DType::BF16 ? mmf_kernel<DType::BF16>
                              : mmf_kernel<DType::F32>;
    run_kernel(s, kernel, grid, dim3(kFloatThreads), 0, y, static_cast<const uint8_t*>(w), row_bytes, x,
               static_cast<int>(n), static_cast<int>(n_in), static_cast<int>(n_out));
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda mmf: kernel launch failed: %s", cudaGetErrorString(e));
    return true;
}

}  // namespace cuda
}  // namespace cactus
