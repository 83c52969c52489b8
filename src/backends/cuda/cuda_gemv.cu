// Decode products (n <= 8 tokens) as integer dot products, after llama.cpp's mmvq: each block
// rounds x once into shared memory exactly as the CPU's vec_dot_type does (Q8_0 / Q8_1 blocks of 32
// for the legacy formats, Q8_K blocks of 256 for the K-quants), then each warp walks whole weight
// rows, its lanes splitting every row's blocks into 8-byte parts (so a warp's loads are contiguous),
// and multiplies 32-bit words of 4-bit to 8-bit weights with __dp4a. Each part's integer sum is
// scaled as the CPU's vec_dot scales its block's (d_w * d_x * isum, plus the min terms), so the
// result equals the CPU's up to float summation order. Launchers: cuda_kernels.h (gemv).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_activation.cuh"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_reduce.cuh"
#include "backends/cuda/cuda_quant.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr size_t kSharedDefault = 48u << 10;  // shared memory of a block without the opt-in
constexpr size_t kStaticShared = 1u << 10;    // gemv_kernel's own (partial[]), at most this
constexpr int kMaxRowsPerWarp = 4;            // row iterations per block
constexpr uint32_t kNibbles = 0x0F0F0F0Fu;

// The launch's products, by value (fixed per shape: a replayed step graph sees the same bytes).
struct GemvArgs {
    GemvProduct p[kGemvMaxProducts];
    int row_start[kGemvMaxProducts + 1];  // product i owns rows [row_start[i], row_start[i + 1])
    int n_products = 0;
    int n_rows = 0;  // rows the warps walk (GATED: the gate's rows, each with its up row)
    int n = 0;       // tokens
    int n_in = 0;
    int rows_per_block = kWarpsPerBlock;
    int warps_per_row = 1;  // a power of two <= kWarpsPerBlock
    int epilogue = 0;
    int act = 0;
    int unused = 0;  // no padding: the step recorder compares the argument's bytes between steps
};
static_assert(sizeof(GemvArgs) == sizeof(GemvProduct) * kGemvMaxProducts + sizeof(int) * (kGemvMaxProducts + 10),
              "GemvArgs has padding");

// ---- word loads ---------------------------------------------------------------------------------

// Word i of p, p only 2-byte aligned (blocks of 18, 22, 34 and 210 bytes): two 16-bit loads.
__device__ __forceinline__ int ld_b2(const uint8_t* p, int i) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<int>(static_cast<uint32_t>(h[2 * i]) | (static_cast<uint32_t>(h[2 * i + 1]) << 16));
}

// Word i of p, p 4-byte aligned (blocks of 20, 24, 144 and 176 bytes).
__device__ __forceinline__ int ld_b4(const uint8_t* p, int i) { return reinterpret_cast<const int*>(p)[i]; }

__device__ __forceinline__ float ld_f16(const uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }

// Bits 0..3 of vh into bit 4 of bytes 0..3 (the fifth bits of Q5_0 / Q5_1).
__device__ __forceinline__ int spread_q5(uint32_t vh) {
    return static_cast<int>(((vh << 4) & 0x10u) | ((vh << 11) & 0x1000u) | ((vh << 18) & 0x100000u) |
                            ((vh << 25) & 0x10000000u));
}

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

// Two consecutive activation words (8-byte aligned: every offset used is even).
__device__ __forceinline__ int2 xw(const int* xb, int word) { return *reinterpret_cast<const int2*>(xb + word); }

// ---- one part of one weight block -----------------------------------------------------------------
// Gemv<T>: kQK elements and kBytes bytes per block, kParts lanes per block (8 bytes of quants
// each). load() reads the part's weights; dot() returns its share of the CPU's block sum against
// the token's block of q8 words xb (dx: the activation block's scale, sx: Q8_1's f16 d * sum(q)).

template <DType T>
struct Gemv;

// Blocks of an f16 scale d, then the quants from byte 2 (Q4_0, Q8_0): d and words 2p, 2p + 1.
struct ScaleAndWords {
    int v0, v1, part;
    float d;
    __device__ void load(const uint8_t* b, int p) {
        part = p;
        d = ld_f16(b);
        v0 = ld_b2(b + 2, 2 * p);
        v1 = ld_b2(b + 2, 2 * p + 1);
    }
};

template <>
struct Gemv<DType::Q4_0> : ScaleAndWords {
    static constexpr int kQK = 32, kBytes = 18, kParts = 2;
    // Bytes 8p..8p+7: elements 8p.. (low nibbles) and 16+8p.. (high nibbles); q - 8 as sum(q x) - 8 sum(x).
    __device__ float dot(const int* xb, float dx, float) const {
        const int2 lo = xw(xb, 2 * part), hi = xw(xb, 4 + 2 * part);
        int s = dp4a(v0 & kNibbles, lo.x, dp4a(v1 & kNibbles, lo.y, 0));
        s = dp4a((v0 >> 4) & kNibbles, hi.x, dp4a((v1 >> 4) & kNibbles, hi.y, s));
        const int s8 =
            dp4a(0x08080808, lo.x, dp4a(0x08080808, lo.y, dp4a(0x08080808, hi.x, dp4a(0x08080808, hi.y, 0))));
        return static_cast<float>(s - s8) * (d * dx);
    }
};

template <>
struct Gemv<DType::Q4_1> {
    static constexpr int kQK = 32, kBytes = 20, kParts = 2;
    int v0, v1, part;
    float d, m;
    __device__ void load(const uint8_t* b, int p) {
        part = p;
        d = ld_f16(b);
        m = ld_f16(b + 2);
        v0 = ld_b4(b + 4, 2 * p);
        v1 = ld_b4(b + 4, 2 * p + 1);
    }
    // The CPU adds m * s once per block: part 0 adds it.
    __device__ float dot(const int* xb, float dx, float sx) const {
        const int2 lo = xw(xb, 2 * part), hi = xw(xb, 4 + 2 * part);
        int s = dp4a(v0 & kNibbles, lo.x, dp4a(v1 & kNibbles, lo.y, 0));
        s = dp4a((v0 >> 4) & kNibbles, hi.x, dp4a((v1 >> 4) & kNibbles, hi.y, s));
        const float r = static_cast<float>(s) * (d * dx);
        return part == 0 ? r + m * sx : r;
    }
};

// Q5_0 / Q5_1: the fifth bits (qh bit j for element j) joined to the nibbles of words w = 2p, 2p+1.
__device__ __forceinline__ int q5_sum(int v0, int v1, uint32_t qh, int part, const int* xb) {
    const int w0 = 2 * part, w1 = 2 * part + 1;
    const int2 lo = xw(xb, w0), hi = xw(xb, 4 + w0);
    int s = dp4a((v0 & kNibbles) | spread_q5(qh >> (4 * w0)), lo.x, 0);
    s = dp4a((v1 & kNibbles) | spread_q5(qh >> (4 * w1)), lo.y, s);
    s = dp4a(((v0 >> 4) & kNibbles) | spread_q5(qh >> (4 * w0 + 16)), hi.x, s);
    return dp4a(((v1 >> 4) & kNibbles) | spread_q5(qh >> (4 * w1 + 16)), hi.y, s);
}

template <>
struct Gemv<DType::Q5_0> {
    static constexpr int kQK = 32, kBytes = 22, kParts = 2;
    int v0, v1, part;
    uint32_t qh;
    float d;
    __device__ void load(const uint8_t* b, int p) {
        part = p;
        d = ld_f16(b);
        qh = static_cast<uint32_t>(ld_b2(b + 2, 0));
        v0 = ld_b2(b + 6, 2 * p);
        v1 = ld_b2(b + 6, 2 * p + 1);
    }
    __device__ float dot(const int* xb, float dx, float) const {
        const int2 lo = xw(xb, 2 * part), hi = xw(xb, 4 + 2 * part);
        const int s16 =
            dp4a(0x10101010, lo.x, dp4a(0x10101010, lo.y, dp4a(0x10101010, hi.x, dp4a(0x10101010, hi.y, 0))));
        return static_cast<float>(q5_sum(v0, v1, qh, part, xb) - s16) * (d * dx);
    }
};

template <>
struct Gemv<DType::Q5_1> {
    static constexpr int kQK = 32, kBytes = 24, kParts = 2;
    int v0, v1, part;
    uint32_t qh;
    float d, m;
    __device__ void load(const uint8_t* b, int p) {
        part = p;
        d = ld_f16(b);
        m = ld_f16(b + 2);
        qh = static_cast<uint32_t>(ld_b4(b + 4, 0));
        v0 = ld_b4(b + 8, 2 * p);
        v1 = ld_b4(b + 8, 2 * p + 1);
    }
    __device__ float dot(const int* xb, float dx, float sx) const {
        const float r = static_cast<float>(q5_sum(v0, v1, qh, part, xb)) * (d * dx);
        return part == 0 ? r + m * sx : r;
    }
};

template <>
struct Gemv<DType::Q8_0> : ScaleAndWords {
    static constexpr int kQK = 32, kBytes = 34, kParts = 4;
    __device__ float dot(const int* xb, float dx, float) const {
        const int2 u = xw(xb, 2 * part);
        return static_cast<float>(dp4a(v0, u.x, dp4a(v1, u.y, 0))) * (d * dx);
    }
};

// Q4_K / Q5_K: part p (0..15) holds quant words 2p, 2p+1 of the super-block: chunk c = p / 4 of 32
// bytes, positions 4g .. 4g+7 (g = 2p mod 8) of sub-blocks 2c (low nibbles) and 2c+1 (high).
// CPU: d_x d scaled - d_x dmin mins with scaled = sum sc_j isum_j, mins = sum m_j sum(x_j).
struct KScaleMin {
    int j0, g, sc0, m0, sc1, m1;
    float d, dmin;
    __device__ void load(const uint8_t* b, int p) {
        j0 = 2 * (p >> 2);
        g = (2 * p) & 7;
        d = ld_f16(b);
        dmin = ld_f16(b + 2);
        k_scale_min(j0, b + 4, &sc0, &m0);
        k_scale_min(j0 + 1, b + 4, &sc1, &m1);
    }
    // lo0/lo1, hi0/hi1: the 5-bit or 4-bit values of the two words for sub-blocks j0 and j0+1.
    __device__ float dot(int lo0, int lo1, int hi0, int hi1, const int* xb, float dx) const {
        const int2 ul = xw(xb, 8 * j0 + g), uh = xw(xb, 8 * (j0 + 1) + g);
        const int sl = dp4a(lo0, ul.x, dp4a(lo1, ul.y, 0));
        const int sh = dp4a(hi0, uh.x, dp4a(hi1, uh.y, 0));
        const int xl = dp4a(0x01010101, ul.x, dp4a(0x01010101, ul.y, 0));
        const int xh = dp4a(0x01010101, uh.x, dp4a(0x01010101, uh.y, 0));
        const int scaled = sc0 * sl + sc1 * sh;
        const int mins = m0 * xl + m1 * xh;
        return dx * d * static_cast<float>(scaled) - dx * dmin * static_cast<float>(mins);
    }
};

template <>
struct Gemv<DType::Q4_K> {
    static constexpr int kQK = 256, kBytes = 144, kParts = 16;
    KScaleMin k;
    int v0, v1;
    __device__ void load(const uint8_t* b, int p) {
        k.load(b, p);
        v0 = ld_b4(b + 16, 2 * p);
        v1 = ld_b4(b + 16, 2 * p + 1);
    }
    __device__ float dot(const int* xb, float dx, float) const {
        return k.dot(v0 & kNibbles, v1 & kNibbles, (v0 >> 4) & kNibbles, (v1 >> 4) & kNibbles, xb, dx);
    }
};

template <>
struct Gemv<DType::Q5_K> {
    static constexpr int kQK = 256, kBytes = 176, kParts = 16;
    KScaleMin k;
    int v0, v1;
    uint32_t h0, h1;  // qh words g, g+1: bit j of byte l is sub-block j's fifth bit at position l
    __device__ void load(const uint8_t* b, int p) {
        k.load(b, p);
        h0 = static_cast<uint32_t>(ld_b4(b + 16, k.g));
        h1 = static_cast<uint32_t>(ld_b4(b + 16, k.g + 1));
        v0 = ld_b4(b + 48, 2 * p);
        v1 = ld_b4(b + 48, 2 * p + 1);
    }
    __device__ float dot(const int* xb, float dx, float) const {
        const int j0 = k.j0;
        const int lo0 = (v0 & kNibbles) | static_cast<int>(((h0 >> j0) & 0x01010101u) << 4);
        const int lo1 = (v1 & kNibbles) | static_cast<int>(((h1 >> j0) & 0x01010101u) << 4);
        const int hi0 = ((v0 >> 4) & kNibbles) | static_cast<int>(((h0 >> (j0 + 1)) & 0x01010101u) << 4);
        const int hi1 = ((v1 >> 4) & kNibbles) | static_cast<int>(((h1 >> (j0 + 1)) & 0x01010101u) << 4);
        return k.dot(lo0, lo1, hi0, hi1, xb, dx);
    }
};

// Q6_K: part p (0..15) is half h = p / 8 of the super-block, ql words wq, wq+1 (wq = 2 (p mod 8))
// of that half: positions 4g .. 4g+7 (g = wq mod 8) of chunk 4h + ka (low nibbles, ka = wq / 8) and
// of chunk 4h + ka + 2 (high nibbles); the two high bits come from qh words g, g+1 of the half.
template <>
struct Gemv<DType::Q6_K> {
    static constexpr int kQK = 256, kBytes = 210, kParts = 16;
    int a0, a1, b0, b1;  // the 6-bit values - 32 (signed bytes) of chunks ca and cb
    int ca, g, sca, scb;
    float d;
    __device__ void load(const uint8_t* b, int p) {
        const int h = p >> 3;
        const int wq = 2 * (p & 7);
        const int ka = wq >> 3;
        g = wq & 7;
        ca = 4 * h + ka;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + (g >= 4 ? 1 : 0);
        sca = sc[2 * ka];
        scb = sc[2 * ka + 4];
        d = ld_f16(b + 208);
        const uint32_t l0 = static_cast<uint32_t>(ld_b2(b + 64 * h, wq));
        const uint32_t l1 = static_cast<uint32_t>(ld_b2(b + 64 * h, wq + 1));
        const uint32_t q0 = static_cast<uint32_t>(ld_b2(b + 128 + 32 * h, g));
        const uint32_t q1 = static_cast<uint32_t>(ld_b2(b + 128 + 32 * h, g + 1));
        a0 = six(l0 & kNibbles, q0 >> (2 * ka));
        a1 = six(l1 & kNibbles, q1 >> (2 * ka));
        b0 = six((l0 >> 4) & kNibbles, q0 >> (2 * ka + 4));
        b1 = six((l1 >> 4) & kNibbles, q1 >> (2 * ka + 4));
    }
    static __device__ int six(uint32_t low, uint32_t high) {
        return static_cast<int>(__vsubss4(low | ((high & 0x03030303u) << 4), 0x20202020u));
    }
    __device__ float dot(const int* xb, float dx, float) const {
        const int2 ua = xw(xb, 8 * ca + g), ub = xw(xb, 8 * (ca + 2) + g);
        const int scaled = sca * dp4a(a0, ua.x, dp4a(a1, ua.y, 0)) + scb * dp4a(b0, ub.x, dp4a(b1, ub.y, 0));
        return dx * d * static_cast<float>(scaled);
    }
};

// ---- activations into shared memory -----------------------------------------------------------------

__device__ __forceinline__ float f16_round(float v) { return __half2float(__float2half_rn(v)); }

// x [n, n_in] -> xq [n, n_in / 4] words of int8, xd / xs [n, n_in / 32]. Legacy types (Q8_0 / Q8_1,
// round_activations' rounding): 8 lanes per 32-block, xd = f16(d), xs = f16(d * sum(q)). K-quants
// (Q8_K): a warp per 256-block, its d = 1 / iscale at xd[8 * (block)]. Every thread of the block
// runs the same iterations (the shuffles need whole warps); groups past the end quantize zeros.
template <DType T>
__device__ void quantize_x(int* xq, float* xd, float* xs, const float* x, int n, int n_in) {
    if constexpr (Gemv<T>::kQK == 32) {
        const int total = n * (n_in / 4);  // words, a multiple of 8
        for (int base = 0; base < total; base += kThreads) {
            const int i = base + static_cast<int>(threadIdx.x);
            const bool active = i < total;
            float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (active) {
#pragma unroll
                for (int j = 0; j < 4; ++j) f[j] = __ldg(x + static_cast<size_t>(i) * 4 + j);
            }
            float amax = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fabsf(f[j]));
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            uint32_t packed = 0;
            int sum = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int q = static_cast<int>(roundf(f[j] * id));
                sum += q;
                packed |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * j);
            }
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (active) {
                xq[i] = static_cast<int>(packed);
                if ((i & 7) == 0) {
                    xd[i >> 3] = f16_round(d);
                    xs[i >> 3] = f16_round(static_cast<float>(sum) * d);
                }
            }
        }
    } else {
        const int total = n * (n_in / 8);  // pairs of words, a multiple of 32
        const int lane = static_cast<int>(threadIdx.x) & 31;
        for (int base = 0; base < total; base += kThreads) {
            const int i = base + static_cast<int>(threadIdx.x);
            const bool active = i < total;
            float f[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) f[j] = active ? __ldg(x + static_cast<size_t>(i) * 8 + j) : 0.0f;
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
            uint32_t w[2] = {0, 0};
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int q = static_cast<int>(fminf(127.0f, rintf(iscale * f[j])));
                w[j >> 2] |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * (j & 3));
            }
            if (active) {
                *reinterpret_cast<int2*>(xq + 2 * static_cast<size_t>(i)) =
                    make_int2(static_cast<int>(w[0]), static_cast<int>(w[1]));
                if (lane == 0) xd[8 * (i >> 5)] = amax != 0.0f ? 1.0f / iscale : 0.0f;
            }
        }
    }
}

// ---- the kernel -----------------------------------------------------------------------------------

// acc[t] += this lane's share of row . x_t for the tokens t < n. The row's items (block parts)
// are split over the `split` warps of the row (this one is `slice`), 32 consecutive items per warp
// in turn, and each lane loads kUnroll items before it multiplies any (loads in flight are what a
// decode product is bound by); a lane adds its items in ascending order.
template <DType T, int NT>
__device__ __forceinline__ void row_dot(float* acc, const uint8_t* row, const int* xq, const float* xd, const float* xs,
                                        int n, int n_in, int lane, int slice, int split) {
    using G = Gemv<T>;
    constexpr int kUnroll = NT == 1 ? 4 : 2;
    const int items = n_in / G::kQK * G::kParts;
    const int words = n_in / 4;
    const int scales = n_in / 32;
    const int stride = 32 * split;
    for (int i0 = slice * 32 + lane; i0 < items; i0 += stride * kUnroll) {
        G g[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int i = i0 + u * stride;
            if (i < items) g[u].load(row + static_cast<size_t>(i / G::kParts) * G::kBytes, i % G::kParts);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int i = i0 + u * stride;
            if (i >= items) break;
            const int b = i / G::kParts;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (t < n) {
                    const int di = t * scales + b * (G::kQK / 32);
                    const float sx = G::kQK == 32 ? xs[di] : 0.0f;
                    acc[t] += g[u].dot(xq + t * words + b * (G::kQK / 4), xd[di], sx);
                }
            }
        }
    }
}

// Row r's value of token t: the epilogue of the launch.
__device__ __forceinline__ void store_row(const GemvArgs& a, const GemvProduct& p, int row, int t, float d, float up) {
    float* out = p.y + static_cast<size_t>(t) * p.n_out + row;
    if (a.epilogue == static_cast<int>(GemvEpilogue::GATED)) {
        *out = activate(d, a.act) * up;
    } else if (a.epilogue == static_cast<int>(GemvEpilogue::ACCUMULATE)) {
        *out = *out + d;
    } else {
        *out = p.bias != nullptr ? d + p.bias[row] : d;
    }
}

// Each block rounds x into shared memory, then computes rows_per_block rows, kWarpsPerBlock /
// warps_per_row at a time (block b owns rows [b * rows_per_block, (b + 1) * rows_per_block)). With
// warps_per_row > 1 the warps of a row add their sums through shared memory in slice order, so a
// row's value depends only on n_in and the type (warps_per_row's inputs), never on the launch.
// Every warp runs every iteration (barriers); warps past the last row compute nothing.
template <DType T, int NT>
__global__ void __launch_bounds__(kThreads, 4) gemv_kernel(const float* x, GemvArgs a) {
    pdl_start();
    extern __shared__ int shared_words[];
    __shared__ float partial[kWarpsPerBlock][2 * NT];  // [warp][gate sums, up sums]
    static_assert(sizeof(partial) <= kStaticShared, "kStaticShared");
    const int n = a.n;
    const int n_in = a.n_in;
    int* xq = shared_words;                                     // [n, n_in / 4]
    float* xd = reinterpret_cast<float*>(xq + n * (n_in / 4));  // [n, n_in / 32]
    float* xs = xd + n * (n_in / 32);                           // [n, n_in / 32]
    quantize_x<T>(xq, xd, xs, x, n, n_in);
    __syncthreads();
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int split = a.warps_per_row;
    const int slots = kWarpsPerBlock / split;  // rows per iteration
    const int slot = warp / split;
    const int slice = warp % split;
    const bool gated = a.epilogue == static_cast<int>(GemvEpilogue::GATED);
    const int first = static_cast<int>(blockIdx.x) * a.rows_per_block;
    for (int base = first; base < first + a.rows_per_block && base < a.n_rows; base += slots) {  // block-uniform
        const int r = base + slot;
        const bool live = r < a.n_rows && r < first + a.rows_per_block;
        int pi = 0;
        while (live && pi + 1 < a.n_products && r >= a.row_start[pi + 1]) ++pi;
        const GemvProduct& p = a.p[pi];
        const int row = r - a.row_start[pi];
        float acc[NT], up[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[t] = up[t] = 0.0f;
        if (live) {
            row_dot<T, NT>(acc, static_cast<const uint8_t*>(p.w) + static_cast<size_t>(row) * p.row_bytes, xq, xd, xs,
                           n, n_in, lane, slice, split);
            if (gated) {
                row_dot<T, NT>(up, static_cast<const uint8_t*>(a.p[1].w) + static_cast<size_t>(row) * a.p[1].row_bytes,
                               xq, xd, xs, n, n_in, lane, slice, split);
            }
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            acc[t] = warp_sum(acc[t]);
            if (gated) up[t] = warp_sum(up[t]);
        }
        if (split > 1) {      // block-uniform: every thread reaches both barriers
            __syncthreads();  // the previous iteration's readers are done with partial[]
            if (lane == 0) {
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    partial[warp][t] = acc[t];
                    partial[warp][NT + t] = up[t];
                }
            }
            __syncthreads();
            if (slice == 0) {
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    for (int s = 1; s < split; ++s) {
                        acc[t] += partial[warp + s][t];
                        up[t] += partial[warp + s][NT + t];
                    }
                }
            }
        }
        if (!live || slice != 0 || lane != 0) continue;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < n) store_row(a, p, row, t, acc[t], up[t]);
        }
    }
}

template <DType T>
constexpr int block_elements() {
    return Gemv<T>::kQK;
}

// Warps per row: the fewest (a power of two) that leave each lane at most 4 items of the row, so
// long rows (down projections: n_in 8192 and more, few rows) still keep enough loads in flight.
// A function of the type and n_in only: a row's summation order is the same in every launch.
template <DType T>
int warps_per_row(int n_in) {
    const int items = n_in / Gemv<T>::kQK * Gemv<T>::kParts;
    int split = 1;
    while (split < kWarpsPerBlock && items > 32 * 4 * split) split *= 2;
    return split;
}

// Rows per block: enough blocks for ~4 per SM, then up to kMaxRowsPerWarp iterations per block
// (x is rounded once per block, so fewer, fuller blocks round it less often).
int rows_per_block(int n_rows, int split) {
    int device = 0, sms = 132;
    if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const int slots = kWarpsPerBlock / split;
    const int iters = n_rows / (slots * 4 * (sms > 0 ? sms : 132));
    return slots * (iters < 1 ? 1 : (iters > kMaxRowsPerWarp ? kMaxRowsPerWarp : iters));
}

// Whether `shared` bytes of dynamic shared memory can be had by `kernel` (opting in above 48 KiB,
// less the kernel's own).
bool shared_fits(const void* kernel, size_t shared) {
    if (shared + kStaticShared <= kSharedDefault) return true;
    int device = 0, optin = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (shared + kStaticShared > static_cast<size_t>(optin)) return false;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)) !=
        cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return true;
}

}  // namespace

bool gemv_supported(DType type) {
    return dispatch_quant(type, [](auto) {});
}

bool gemv(cudaStream_t s, const GemvProduct* products, size_t n_products, DType type, const float* x, size_t n,
          size_t n_in, GemvEpilogue epilogue, int act) {
    if (n == 0 || n > kGemvMaxTokens || n_products == 0 || n_products > kGemvMaxProducts) return false;
    const bool gated = epilogue == GemvEpilogue::GATED;
    if (gated && (n_products != 2 || products[0].n_out != products[1].n_out)) return false;
    GemvArgs a;
    a.n_products = static_cast<int>(n_products);
    a.n = static_cast<int>(n);
    a.n_in = static_cast<int>(n_in);
    a.epilogue = static_cast<int>(epilogue);
    a.act = act;
    size_t rows = 0;
    a.row_start[0] = 0;
    for (size_t i = 0; i < n_products; ++i) {
        const GemvProduct& p = products[i];
        // 4-byte aligned rows: the word loads of the 20/24/144/176-byte blocks.
        if (p.n_out == 0 || reinterpret_cast<uintptr_t>(p.w) % 4 != 0 || p.row_bytes % 2 != 0) return false;
        a.p[i] = p;
        if (!gated || i == 0) rows += p.n_out;  // GATED: the up rows ride with the gate's (product 0)
        a.row_start[i + 1] = static_cast<int>(rows);
    }
    for (size_t i = n_products; i < kGemvMaxProducts; ++i) a.row_start[i + 1] = static_cast<int>(rows);
    if (rows > (1u << 30) || n_in > (1u << 24)) return false;
    a.n_rows = static_cast<int>(rows);
    const size_t shared = n * n_in + n * (n_in / 32) * 2 * sizeof(float);
    bool ok = false;
    const bool known = dispatch_quant(type, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        if (n_in == 0 || n_in % block_elements<T>() != 0) return;
        void (*kernel)(const float*, GemvArgs) = n == 1 ? gemv_kernel<T, 1> : gemv_kernel<T, kGemvMaxTokens>;
        if (!shared_fits(reinterpret_cast<const void*>(kernel), shared)) return;
        a.warps_per_row = warps_per_row<T>(a.n_in);
        a.rows_per_block = rows_per_block(a.n_rows, a.warps_per_row);
        const unsigned blocks = static_cast<unsigned>((rows + a.rows_per_block - 1) / a.rows_per_block);
        run_kernel(s, kernel, dim3(blocks), dim3(kThreads), shared, x, a);
        ok = true;
    });
    if (!known || !ok) return false;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda gemv: kernel launch failed: %s", cudaGetErrorString(e));
    return true;
}

}  // namespace cuda
}  // namespace cactus
