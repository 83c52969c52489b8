// Attention over an f16 KV cache on the tensor cores, for a batch whose tokens share the cache rows
// (a prompt, a decode or verification step of one sequence): one block of 4 warps per (16 queries,
// query head), or, where such pairs are fewer than 8 (decode steps of models with few heads), a
// cluster of 8 such blocks per pair. The warps split the cache rows in steps of 16 (warp w takes
// steps w, w + 4, ...; in a cluster, w counts across its blocks) and skip a step whose rows no
// query of the block sees. Per
// step a warp copies 16 rows of keys (and values) into its own shared tile, then
//   scores  S [16 queries x 16 rows] = Q K^T  with mma.sync m16n8k16 (f16 in, f32 sums),
//   output  O [16 x dv] += P V              with the same mma, P the f16 weights.
// The arithmetic is attend()'s with f16 caches (cuda_attention.cu, and the CPU's): the query is
// rounded to f16, the weights are the normalized softmax rounded to f16. So a first pass finds each
// query's max and sum (the warps' partial ones combined through shared memory, a cluster's through
// each other's), a second computes the rounded weights and their products with the values; the
// warps' partial outputs are summed in warp order, then block order (deterministic). Rows no query sees are masked in S; values of rows that hold no
// position are read as 0 (their memory may be anything, and 0 x NaN would leak into the sum).
// Fragment layouts: PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type" and
// ldmatrix; g = lane / 4 is a thread's query (and g + 8), 2 (lane % 4) its first column.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_attention_mask.cuh"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 4;
// Batches of fewer (16-query tile, head) pairs than kSplitBelowPairs run each pair as a cluster of
// kSplit blocks sharing its rows. On an H100 that paid where a decode step has very few heads
// (gemma3-270m, 4 heads of dim 256: tg128 1.09x) and cost where it has 9-14 (smollm2, qwen2.5-coder:
// tg128 0.94-0.98x); at pp512 clusters took 1.5-2.4x the attention time of one block per pair (the
// cluster barriers and the 8 blocks' repeated query loads cost more than the idle SMs they fill).
constexpr int kSplit = 8;
constexpr size_t kSplitBelowPairs = 8;
constexpr int kQueries = 16;  // one mma row tile
constexpr int kRows = 16;     // cache rows of a warp's step: two mma column tiles
constexpr int kPad = 8;       // halves after each shared row: rows stay 16-byte aligned, ldmatrix spreads banks

// Halves of shared memory: the block's queries, then per warp a tile of keys and one of values.
template <int DK, int DV>
struct MmaLayout {
    static constexpr int kQStride = DK + kPad;
    static constexpr int kVStride = DV + kPad;
    static constexpr int kWarpHalves = kRows * (kQStride + kVStride);
    static constexpr size_t kBytes = (static_cast<size_t>(kQueries) * kQStride + kWarps * kWarpHalves) * 2;
    static_assert(static_cast<size_t>(kQueries) * DV * sizeof(float) <= kBytes, "the output sum reuses the tiles");
    static_assert(DK % 16 == 0 && DV % 16 == 0, "whole mma tiles");
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __half* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

// d += a b: a 16 x 16 f16 (row major), b 16 x 8 f16 (column major), d 16 x 8 f32.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// What every warp of a block reads: the block's queries and the cache rows they share.
struct MmaBlock {
    const KvAttnDesc* qd;  // [kQueries] in shared memory
    int nq;                // queries of the block (the last block may have fewer)
    int rows;              // rows of the longest view
    const __half* k;       // row 0 of the KV head
    const __half* v;
    const int32_t* row_pos;
    int k_width, v_width;  // halves between rows
    float scale;
};

// Bit e + 4 nb of the result: whether this thread's score sc[nb][e] (query g + 8 (e / 2), row
// r0 + 8 nb + 2 (lane % 4) + e % 2) is visible.
__device__ __forceinline__ unsigned visible_bits(const MmaBlock& b, int r0, int lane) {
    const int g = lane >> 2;
    unsigned bits = 0;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int r = r0 + nb * 8 + (lane & 3) * 2 + j;
            const int32_t rp = r < b.rows ? b.row_pos[r] : -1;
#pragma unroll
            for (int qi = 0; qi < 2; ++qi) {
                const int i = g + qi * 8;
                if (i < b.nq && row_visible(b.qd[i], r, rp)) bits |= 1u << (nb * 4 + qi * 2 + j);
            }
        }
    }
    return bits;
}

// Copies rows [r0, r0 + 16) of one head (dim halves each) into a shared tile, 16 bytes per lane and
// load; rows past the view, and with zero_empty rows holding no position, are zeros.
template <int DIM>
__device__ __forceinline__ void load_rows(__half* tile, const __half* src, int width, const MmaBlock& b, int r0,
                                          bool zero_empty, int lane) {
    constexpr int kChunks = DIM / 8;
    constexpr int kStride = DIM + kPad;
    for (int e = lane; e < kRows * kChunks; e += 32) {
        const int j = e / kChunks, c = e % kChunks;
        const int r = r0 + j;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < b.rows && !(zero_empty && b.row_pos[r] < 0)) {
            val = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(r) * width + c * 8);
        }
        *reinterpret_cast<uint4*>(tile + j * kStride + c * 8) = val;
    }
    __syncwarp();
}

// sc = Q K^T for the warp's 16 rows (unscaled): sc[nb][e] is query g + 8 (e / 2), row 8 nb + 2 (lane % 4) + e % 2.
template <int DK>
__device__ __forceinline__ void scores(float (&sc)[2][4], const __half* qs, const __half* kt, int lane) {
    constexpr int kStride = DK + kPad;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
    const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk) {
        uint32_t a[4], b[4];
        ldmatrix_x4(a, qs + a_row * kStride + kk * 16 + a_col);
        ldmatrix_x4(b, kt + b_row * kStride + kk * 16 + b_col);
        mma_f16(sc[0], a, b[0], b[1]);
        mma_f16(sc[1], a, b[2], b[3]);
    }
}

// Pass 1 of a warp: per query of this thread (g, g + 8), the max of its visible scaled scores and
// the sum of their exp(s - max), over the warp's steps.
template <int DK, int DV>
__device__ void warp_stats(float (&m)[2], float (&l)[2], const MmaBlock& b, const __half* qs, __half* kt, int r_first,
                           int r_step, int lane) {
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
    for (int r0 = r_first; r0 < b.rows; r0 += r_step) {
        const unsigned bits = visible_bits(b, r0, lane);
        if (!__any_sync(0xffffffffu, bits != 0)) continue;
        load_rows<DK>(kt, b.k, b.k_width, b, r0, false, lane);
        float sc[2][4];
        scores<DK>(sc, qs, kt, lane);
#pragma unroll
        for (int qi = 0; qi < 2; ++qi) {
            float mx = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < 2; ++nb)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    if (bits >> (nb * 4 + qi * 2 + j) & 1u) mx = fmaxf(mx, sc[nb][qi * 2 + j] * b.scale);
            const float new_m = fmaxf(m[qi], quad_max(mx));
            float sum = 0.0f;
#pragma unroll
            for (int nb = 0; nb < 2; ++nb)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    if (bits >> (nb * 4 + qi * 2 + j) & 1u) sum += expf(sc[nb][qi * 2 + j] * b.scale - new_m);
            sum = quad_sum(sum);
            const float corr = m[qi] == -INFINITY ? 0.0f : expf(m[qi] - new_m);
            l[qi] = l[qi] * corr + sum;
            m[qi] = new_m;
        }
        __syncwarp();  // the next step's load overwrites kt
    }
}

// Pass 2 of a warp: o += P V over the warp's steps, P = f16(exp(s - m) * inv) where visible.
template <int DK, int DV>
__device__ void warp_output(float (&o)[DV / 8][4], const float (&m)[2], const float (&inv)[2], const MmaBlock& b,
                            const __half* qs, __half* kt, __half* vt, int r_first, int r_step, int lane) {
    constexpr int kVStride = DV + kPad;
#pragma unroll
    for (int nb = 0; nb < DV / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
    const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;
    for (int r0 = r_first; r0 < b.rows; r0 += r_step) {
        const unsigned bits = visible_bits(b, r0, lane);
        if (!__any_sync(0xffffffffu, bits != 0)) continue;
        load_rows<DK>(kt, b.k, b.k_width, b, r0, false, lane);
        load_rows<DV>(vt, b.v, b.v_width, b, r0, true, lane);
        float sc[2][4];
        scores<DK>(sc, qs, kt, lane);
        float p[2][4];
#pragma unroll
        for (int nb = 0; nb < 2; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qi = e >> 1;
                p[nb][e] = bits >> (nb * 4 + e) & 1u ? round_half(expf(sc[nb][e] * b.scale - m[qi]) * inv[qi]) : 0.0f;
            }
        // P as the a operand: rows g, g + 8; columns 2 (lane % 4) + {0, 1} and + 8.
        const uint32_t a[4] = {pack_half2(p[0][0], p[0][1]), pack_half2(p[0][2], p[0][3]), pack_half2(p[1][0], p[1][1]),
                               pack_half2(p[1][2], p[1][3])};
#pragma unroll
        for (int nb = 0; nb < DV / 8; nb += 2) {
            uint32_t bv[4];
            ldmatrix_x4_trans(bv, vt + v_row * kVStride + nb * 8 + v_col);
            mma_f16(o[nb], a, bv[0], bv[1]);
            mma_f16(o[nb + 1], a, bv[2], bv[3]);
        }
        __syncwarp();
    }
}

// The block's share of the cache rows: warp w of block c of a cluster of SPLIT blocks takes steps
// c * kWarps + w, + kWarps * SPLIT, ...
template <int SPLIT>
__device__ __forceinline__ int first_row(int warp) {
    const int block = SPLIT > 1 ? static_cast<int>(blockIdx.z) : 0;
    return (block * kWarps + warp) * kRows;
}

// Each query's max and 1 / sum over the partial ones of the warps (and of the SPLIT blocks of the
// cluster, read from their shared memory), in a fixed order.
template <int SPLIT>
__device__ __forceinline__ void combine_stats(float (&m)[2], float (&inv)[2], float (*part_m)[kQueries],
                                              float (*part_l)[kQueries], int g) {
#pragma unroll
    for (int qi = 0; qi < 2; ++qi) {
        const int i = g + qi * 8;
        float mx = -INFINITY, sum = 0.0f;
        for (int c = 0; c < SPLIT; ++c) {
            float(*pm)[kQueries] = part_m;
            if constexpr (SPLIT > 1) pm = cg::this_cluster().map_shared_rank(part_m, c);
            for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, pm[w][i]);
        }
        for (int c = 0; c < SPLIT; ++c) {
            float(*pm)[kQueries] = part_m;
            float(*pl)[kQueries] = part_l;
            if constexpr (SPLIT > 1) {
                pm = cg::this_cluster().map_shared_rank(part_m, c);
                pl = cg::this_cluster().map_shared_rank(part_l, c);
            }
            for (int w = 0; w < kWarps; ++w)
                if (pm[w][i] != -INFINITY) sum += pl[w][i] * expf(pm[w][i] - mx);
        }
        m[qi] = mx;
        inv[qi] = sum > 0.0f ? 1.0f / sum : 0.0f;
    }
}

// out rows t0.. of head h = the sums [kQueries][DV] of the SPLIT blocks (block c writes every
// SPLIT-th element, adding the blocks' sums in block order).
template <int DV, int SPLIT>
__device__ __forceinline__ void write_output(float* out, float* sum, int t0, int nq, int n_head, int h) {
    const int block = SPLIT > 1 ? static_cast<int>(blockIdx.z) : 0;
    for (int e = static_cast<int>(threadIdx.x) * SPLIT + block; e < nq * DV; e += kWarps * 32 * SPLIT) {
        float v = sum[e];
        if constexpr (SPLIT > 1) {
            v = 0.0f;
            for (int c = 0; c < SPLIT; ++c) v += cg::this_cluster().map_shared_rank(sum, c)[e];
        }
        out[static_cast<size_t>(t0 + e / DV) * n_head * DV + h * DV + e % DV] = v;
    }
}

template <int DK, int DV, int SPLIT>
__device__ __forceinline__ void attend_tile(float* out, const float* q, const KvAttnDesc* desc, int n,
                                            const KvAttnShape& sh) {
    using L = MmaLayout<DK, DV>;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ KvAttnDesc qd[kQueries];
    __shared__ float part_m[kWarps][kQueries], part_l[kWarps][kQueries];
    const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
    const int t0 = static_cast<int>(blockIdx.x) * kQueries, h = static_cast<int>(blockIdx.y);
    const int n_head = static_cast<int>(sh.n_head);
    const int kvh = h / (n_head / static_cast<int>(sh.n_head_kv));
    const int nq = min(kQueries, n - t0);
    __half* qs = reinterpret_cast<__half*>(smem);                      // [kQueries][DK + kPad]
    __half* kt = qs + kQueries * L::kQStride + warp * L::kWarpHalves;  // [kRows][DK + kPad]
    __half* vt = kt + kRows * L::kQStride;                             // [kRows][DV + kPad]
    if (static_cast<int>(threadIdx.x) < nq) qd[threadIdx.x] = desc[t0 + threadIdx.x];
    for (int e = static_cast<int>(threadIdx.x); e < kQueries * DK; e += kWarps * 32) {
        const int i = e / DK, c = e % DK;
        const float x = i < nq ? q[static_cast<size_t>(t0 + i) * n_head * DK + h * DK + c] : 0.0f;
        qs[i * L::kQStride + c] = __float2half_rn(x);
    }
    __syncthreads();
    MmaBlock b;
    b.qd = qd;
    b.nq = nq;
    b.rows = 0;
    for (int i = 0; i < nq; ++i) b.rows = max(b.rows, qd[i].n_rows);
    b.k = static_cast<const __half*>(qd[0].k) + kvh * DK;
    b.v = static_cast<const __half*>(qd[0].v) + kvh * DV;
    b.row_pos = qd[0].row_pos;
    b.k_width = static_cast<int>(sh.k_width);
    b.v_width = static_cast<int>(sh.v_width);
    b.scale = sh.scale;
    const int r_first = first_row<SPLIT>(warp), r_step = kWarps * SPLIT * kRows;

    float m[2], l[2];
    warp_stats<DK, DV>(m, l, b, qs, kt, r_first, r_step, lane);
    const int g = lane >> 2;
    if ((lane & 3) == 0) {
        part_m[warp][g] = m[0];
        part_m[warp][g + 8] = m[1];
        part_l[warp][g] = l[0];
        part_l[warp][g + 8] = l[1];
    }
    if constexpr (SPLIT > 1) {
        cg::this_cluster().sync();
    } else {
        __syncthreads();
    }
    float inv[2];
    combine_stats<SPLIT>(m, inv, part_m, part_l, g);
    float o[DV / 8][4];
    warp_output<DK, DV>(o, m, inv, b, qs, kt, vt, r_first, r_step, lane);

    __syncthreads();  // the tiles become the output sum [kQueries][DV]
    float* sum = reinterpret_cast<float*>(smem);
    const int col = (lane & 3) * 2;
    for (int w = 0; w < kWarps; ++w) {
        if (warp == w) {
#pragma unroll
            for (int nb = 0; nb < DV / 8; ++nb)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float& s = sum[(g + (e >> 1) * 8) * DV + nb * 8 + col + (e & 1)];
                    s = (w == 0 ? 0.0f : s) + o[nb][e];
                }
        }
        __syncthreads();
    }
    if constexpr (SPLIT > 1) cg::this_cluster().sync();  // every block's sum is complete
    write_output<DV, SPLIT>(out, sum, t0, nq, n_head, h);
    if constexpr (SPLIT > 1) cg::this_cluster().sync();  // no block leaves while others read its sum
}

// Prompts: one block per (16 queries, head).
template <int DK, int DV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kv_mma_kernel(float* out, const float* q, const KvAttnDesc* desc, int n, KvAttnShape sh) {
    pdl_start();
    attend_tile<DK, DV, 1>(out, q, desc, n, sh);
}

// Batches of fewer than kSplitBelowPairs (tile, head) pairs: a cluster of kSplit blocks per pair
// splits the rows, so a step's few heads fill more of the GPU; the blocks combine their partial
// statistics and outputs through each other's shared memory.
template <int DK, int DV>
__global__ void __cluster_dims__(1, 1, kSplit) __launch_bounds__(kWarps * 32)
    attention_kv_mma_split_kernel(float* out, const float* q, const KvAttnDesc* desc, int n, KvAttnShape sh) {
    pdl_start();
    attend_tile<DK, DV, kSplit>(out, q, desc, n, sh);
}

template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) fail("cuda attention_kv: shared memory of %zu bytes: %s", bytes, cudaGetErrorString(e));
}

template <int DK, int DV>
void launch_mma(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                const KvAttnShape& shape) {
    const size_t bytes = MmaLayout<DK, DV>::kBytes;
    const unsigned heads = static_cast<unsigned>(shape.n_head);
    const unsigned tiles = static_cast<unsigned>((n + kQueries - 1) / kQueries);
    if (static_cast<size_t>(tiles) * heads < kSplitBelowPairs) {
        allow_shared(attention_kv_mma_split_kernel<DK, DV>, bytes);
        run_kernel(s, attention_kv_mma_split_kernel<DK, DV>, dim3(tiles, heads, kSplit), dim3(kWarps * 32), bytes, out,
                   q, desc, static_cast<int>(n), shape);
        return;
    }
    allow_shared(attention_kv_mma_kernel<DK, DV>, bytes);
    const dim3 grid(tiles, heads);
    run_kernel(s, attention_kv_mma_kernel<DK, DV>, grid, dim3(kWarps * 32), bytes, out, q, desc, static_cast<int>(n),
               shape);
}

}  // namespace

bool attention_kv_mma_fits(const KvAttnShape& shape) {
    const size_t dk = shape.head_dim_k;
    return shape.type == KvType::F16 && shape.rows_aligned && dk == shape.head_dim_v &&
           (dk == 64 || dk == 128 || dk == 256) && shape.k_width % 8 == 0 && shape.v_width % 8 == 0 &&
           shape.k_width < (1u << 30) && shape.v_width < (1u << 30);
}

void attention_kv_mma(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                      const KvAttnShape& shape) {
    if (!attention_kv_mma_fits(shape)) fail("cuda attention_kv: the tensor-core path does not take this shape");
    switch (shape.head_dim_k) {
        case 64:
            launch_mma<64, 64>(s, out, q, desc, n, shape);
            break;
        case 128:
            launch_mma<128, 128>(s, out, q, desc, n, shape);
            break;
        default:
            launch_mma<256, 256>(s, out, q, desc, n, shape);
            break;
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda attention_kv: kernel launch failed: %s", cudaGetErrorString(e));
}

}  // namespace cuda
}  // namespace cactus
