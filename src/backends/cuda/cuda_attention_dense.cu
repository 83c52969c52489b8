// Dense attention (the encoders' self-attention, Whisper's decoder) of head dims up to 128, in f32
// throughout like the CPU's (only the summation order differs):
//   many queries (n_q >= kTileQueries): one block of 128 threads per (32 queries, head). Tiles of
//     32 key and value rows go through shared memory once for all 32 queries, so each row is read
//     from memory n_q / 32 times instead of n_q times. Thread t owns query t / 4 and, of each tile,
//     rows t % 4 + 4 j (scores) and output dims t % 4 + 4 a (values): the four threads of a query
//     are neighbouring lanes, so the online softmax's row max and sum are two shuffles.
//   few queries: each (query, head) pair is a cluster of kClusterBlocks blocks of 4 warps; each of
//     the 32 warps takes a contiguous share of the rows, 32 at a time with one row per lane (a whole
//     key dot product per lane: independent loads in flight instead of a reduction per row), keeps
//     its own online softmax, and the 32 partial results are combined through distributed shared
//     memory. Whisper's decoder steps (1 query over 1,500 encoder frames, 8 heads) were latency
//     bound in the row-at-a-time kernel of cuda_attention.cu.
// Wider heads take cuda_attention.cu's kernels.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_reduce.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kMaxDim = 128;                                     // head dims these kernels take (keys and values)
constexpr int kThreads = 128;                                    // 4 warps
constexpr int kTileQueries = 32;                                 // queries of a block (many-query kernel)
constexpr int kTileRows = 32;                                    // key/value rows per shared tile
constexpr int kLanesPerQuery = kThreads / kTileQueries;          // 4
constexpr int kRowsPerLane = kTileRows / kLanesPerQuery;         // 8 scores per thread and tile
constexpr int kDimsPerLane = kMaxDim / kLanesPerQuery;           // 32 output dims per thread at most
constexpr int kClusterBlocks = 8;                                // few-query kernel: blocks per pair
constexpr int kWarpsPerPair = kClusterBlocks * (kThreads / 32);  // 32 row shares
constexpr int kFewDims = kMaxDim / 32;                           // output dims per lane (few queries)

struct DenseShape {
    int n_q, n_kv, n_head, n_head_kv, dk, dv;
    float scale;
    bool causal;
    // Keys j > limit(i) are hidden from query i (causal: the queries are the last n_q of the rows).
    __device__ int limit(int i) const { return causal ? i + (n_kv >= n_q ? n_kv - n_q : 0) : n_kv - 1; }
    __device__ int kv_head(int h) const { return h / (n_head / n_head_kv); }
};

// Shared floats of the many-query kernel: queries and keys padded by one float per row (the
// neighbouring rows a warp reads at once fall in different banks), values, then the weights.
__host__ __device__ constexpr int tile_q_stride(int dk) { return dk + 1; }
__host__ __device__ constexpr int tile_p_stride() { return kTileRows + 1; }
size_t tile_shared_bytes(int dk, int dv) {
    return sizeof(float) *
           (static_cast<size_t>(kTileQueries) * tile_q_stride(dk) + static_cast<size_t>(kTileRows) * tile_q_stride(dk) +
            static_cast<size_t>(kTileRows) * dv + static_cast<size_t>(kTileQueries) * tile_p_stride());
}

__global__ void __launch_bounds__(kThreads)
    dense_tiled_kernel(float* out, const float* q, const float* k, const float* v, const float* mask, DenseShape sh) {
    pdl_start();
    extern __shared__ float smem[];
    const int qs_stride = tile_q_stride(sh.dk);
    float* qs = smem;                           // [kTileQueries][dk + 1]
    float* ks = qs + kTileQueries * qs_stride;  // [kTileRows][dk + 1]
    float* vs = ks + kTileRows * qs_stride;     // [kTileRows][dv]
    float* ps = vs + kTileRows * sh.dv;         // [kTileQueries][kTileRows + 1]
    const int q0 = blockIdx.x * kTileQueries;
    const int h = blockIdx.y;
    const int kvh = sh.kv_head(h);
    const int t = threadIdx.x;
    const int qi = t / kLanesPerQuery;
    const int sub = t % kLanesPerQuery;
    const int query = q0 + qi;
    const size_t q_stride = static_cast<size_t>(sh.n_head) * sh.dk;
    const size_t k_stride = static_cast<size_t>(sh.n_head_kv) * sh.dk;
    const size_t v_stride = static_cast<size_t>(sh.n_head_kv) * sh.dv;
    for (int e = t; e < kTileQueries * sh.dk; e += kThreads) {
        const int i = e / sh.dk, d = e % sh.dk;
        qs[i * qs_stride + d] = q0 + i < sh.n_q ? q[static_cast<size_t>(q0 + i) * q_stride + h * sh.dk + d] : 0.0f;
    }
    const int last_query = min(sh.n_q, q0 + kTileQueries) - 1;
    const int rows_seen = min(sh.n_kv, sh.limit(last_query) + 1);  // no query of the block sees beyond
    const int my_limit = query < sh.n_q ? sh.limit(query) : -1;
    const float* mask_row = mask != nullptr && query < sh.n_q ? mask + static_cast<size_t>(query) * sh.n_kv : nullptr;
    float m = -INFINITY, l = 0.0f;
    float acc[kDimsPerLane];
#pragma unroll
    for (int a = 0; a < kDimsPerLane; ++a) acc[a] = 0.0f;
    for (int r0 = 0; r0 < rows_seen; r0 += kTileRows) {
        __syncthreads();  // the previous tile's rows are no longer read
        for (int e = t; e < kTileRows * sh.dk; e += kThreads) {
            const int r = e / sh.dk, d = e % sh.dk;
            ks[r * qs_stride + d] =
                r0 + r < sh.n_kv ? k[static_cast<size_t>(r0 + r) * k_stride + kvh * sh.dk + d] : 0.0f;
        }
        for (int e = t; e < kTileRows * sh.dv; e += kThreads) {
            const int r = e / sh.dv, d = e % sh.dv;
            vs[r * sh.dv + d] = r0 + r < sh.n_kv ? v[static_cast<size_t>(r0 + r) * v_stride + kvh * sh.dv + d] : 0.0f;
        }
        __syncthreads();
        float s[kRowsPerLane];
#pragma unroll
        for (int j = 0; j < kRowsPerLane; ++j) s[j] = 0.0f;
        const float* qrow = qs + qi * qs_stride;
        for (int d = 0; d < sh.dk; ++d) {
            const float x = qrow[d];
#pragma unroll
            for (int j = 0; j < kRowsPerLane; ++j) s[j] += x * ks[(sub + kLanesPerQuery * j) * qs_stride + d];
        }
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kRowsPerLane; ++j) {
            const int r = r0 + sub + kLanesPerQuery * j;
            const bool seen = r < sh.n_kv && r <= my_limit;
            s[j] = seen ? s[j] * sh.scale + (mask_row ? mask_row[r] : 0.0f) : -INFINITY;
            tile_max = fmaxf(tile_max, s[j]);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_m = fmaxf(m, tile_max);
        const float corr = new_m == -INFINITY ? 1.0f : expf(m - new_m);  // 0 while m is -inf
        float sum = 0.0f;
        float* prow = ps + qi * tile_p_stride();
#pragma unroll
        for (int j = 0; j < kRowsPerLane; ++j) {
            const float p = s[j] == -INFINITY ? 0.0f : expf(s[j] - new_m);
            prow[sub + kLanesPerQuery * j] = p;
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l = l * corr + sum;
        m = new_m;
        __syncwarp();  // a query's weights come from its own four lanes
#pragma unroll
        for (int a = 0; a < kDimsPerLane; ++a) acc[a] *= corr;
        for (int r = 0; r < kTileRows; ++r) {
            const float p = prow[r];
            const float* vrow = vs + r * sh.dv + sub;
#pragma unroll
            for (int a = 0; a < kDimsPerLane; ++a) {
                if (sub + kLanesPerQuery * a < sh.dv) acc[a] += p * vrow[kLanesPerQuery * a];
            }
        }
    }
    if (query >= sh.n_q) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float* o = out + static_cast<size_t>(query) * sh.n_head * sh.dv + h * sh.dv;
#pragma unroll
    for (int a = 0; a < kDimsPerLane; ++a) {
        const int d = sub + kLanesPerQuery * a;
        if (d < sh.dv) o[d] = acc[a] * inv;
    }
}

// One (query, head) pair per cluster; see the file comment.
__global__ void __cluster_dims__(1, 1, kClusterBlocks) __launch_bounds__(kThreads)
    dense_few_kernel(float* out, const float* q, const float* k, const float* v, const float* mask, DenseShape sh) {
    pdl_start();
    __shared__ float qs[kMaxDim];
    __shared__ float part_m[kThreads / 32], part_l[kThreads / 32];
    __shared__ float part_acc[kThreads / 32][kMaxDim];
    const int i = blockIdx.x / sh.n_head;
    const int h = blockIdx.x % sh.n_head;
    const int kvh = sh.kv_head(h);
    const int c = static_cast<int>(blockIdx.z);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int d = threadIdx.x; d < sh.dk; d += kThreads) qs[d] = q[(static_cast<size_t>(i) * sh.n_head + h) * sh.dk + d];
    __syncthreads();
    const size_t k_stride = static_cast<size_t>(sh.n_head_kv) * sh.dk;
    const size_t v_stride = static_cast<size_t>(sh.n_head_kv) * sh.dv;
    const float* kh = k + kvh * sh.dk;
    const float* vh = v + kvh * sh.dv;
    const float* mask_row = mask ? mask + static_cast<size_t>(i) * sh.n_kv : nullptr;
    const int n_rows = min(sh.n_kv, sh.limit(i) + 1);
    const int share = (n_rows + kWarpsPerPair - 1) / kWarpsPerPair;
    const int begin = min(n_rows, (c * (kThreads / 32) + warp) * share);
    const int end = min(n_rows, begin + share);
    float m = -INFINITY, l = 0.0f;
    float acc[kFewDims] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int r0 = begin; r0 < end; r0 += 32) {
        const int r = r0 + lane;
        float s = -INFINITY;
        if (r < end) {
            const float* krow = kh + static_cast<size_t>(r) * k_stride;
            float dot = 0.0f;
            for (int d = 0; d < sh.dk; ++d) dot += qs[d] * krow[d];
            s = dot * sh.scale + (mask_row ? mask_row[r] : 0.0f);
        }
        const float new_m = fmaxf(m, warp_max(s));
        if (new_m == -INFINITY) continue;  // every row so far hidden by the mask
        const float corr = expf(m - new_m);
        const float p = s == -INFINITY ? 0.0f : expf(s - new_m);
        l = l * corr + warp_sum(p);
        m = new_m;
#pragma unroll
        for (int a = 0; a < kFewDims; ++a) acc[a] *= corr;
        const int n = min(32, end - r0);
        for (int j = 0; j < n; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
            const float* vrow = vh + static_cast<size_t>(r0 + j) * v_stride;
#pragma unroll
            for (int a = 0; a < kFewDims; ++a) {
                const int d = lane + 32 * a;
                if (d < sh.dv) acc[a] += pj * vrow[d];
            }
        }
    }
    if (lane == 0) {
        part_m[warp] = m;
        part_l[warp] = l;
    }
#pragma unroll
    for (int a = 0; a < kFewDims; ++a) {
        const int d = lane + 32 * a;
        if (d < sh.dv) part_acc[warp][d] = acc[a];
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    // The 32 shares in order (block, warp): block c writes dims c, c + 8, ...
    float top = -INFINITY;
    for (int b = 0; b < kClusterBlocks; ++b) {
        const float* pm = cluster.map_shared_rank(part_m, b);
        for (int w = 0; w < kThreads / 32; ++w) top = fmaxf(top, pm[w]);
    }
    float weight[kWarpsPerPair];
    float total = 0.0f;
    for (int b = 0; b < kClusterBlocks; ++b) {
        const float* pm = cluster.map_shared_rank(part_m, b);
        const float* pl = cluster.map_shared_rank(part_l, b);
        for (int w = 0; w < kThreads / 32; ++w) {
            const float mw = pm[w];
            weight[b * (kThreads / 32) + w] = mw == -INFINITY ? 0.0f : expf(mw - top);
            total += pl[w] * weight[b * (kThreads / 32) + w];
        }
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    float* o = out + (static_cast<size_t>(i) * sh.n_head + h) * sh.dv;
    for (int d = static_cast<int>(threadIdx.x) * kClusterBlocks + c; d < sh.dv; d += kThreads * kClusterBlocks) {
        float sum = 0.0f;
        for (int b = 0; b < kClusterBlocks; ++b) {
            const float(*pa)[kMaxDim] = cluster.map_shared_rank(part_acc, b);
            for (int w = 0; w < kThreads / 32; ++w) {
                const float wt = weight[b * (kThreads / 32) + w];
                if (wt != 0.0f) sum += pa[w][d] * wt;
            }
        }
        o[d] = sum * inv;
    }
    cluster.sync();  // no block leaves while others read its shared memory
}

void check_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda %s: kernel launch failed: %s", what, cudaGetErrorString(e));
}

}  // namespace

bool attention_dense_fits(size_t dk, size_t dv) { return dk >= 1 && dv >= 1 && dk <= kMaxDim && dv <= kMaxDim; }

void attention_dense_f32(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* mask,
                         size_t n_q, size_t n_kv, size_t n_head, size_t n_head_kv, size_t dk, size_t dv, float scale,
                         bool causal) {
    CACTUS_ASSERT(attention_dense_fits(dk, dv) && n_q > 0 && n_kv > 0);
    DenseShape sh;
    sh.n_q = static_cast<int>(n_q);
    sh.n_kv = static_cast<int>(n_kv);
    sh.n_head = static_cast<int>(n_head);
    sh.n_head_kv = static_cast<int>(n_head_kv);
    sh.dk = static_cast<int>(dk);
    sh.dv = static_cast<int>(dv);
    sh.scale = scale;
    sh.causal = causal;
    if (n_q < static_cast<size_t>(kTileQueries)) {
        run_kernel(s, dense_few_kernel, dim3(static_cast<unsigned>(n_q * n_head), 1, kClusterBlocks), dim3(kThreads), 0,
                   out, q, k, v, mask, sh);
        check_launch("attention_dense");
        return;
    }
    const size_t bytes = tile_shared_bytes(sh.dk, sh.dv);
    const cudaError_t e =
        cudaFuncSetAttribute(dense_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) fail("cuda attention_dense: shared memory of %zu bytes: %s", bytes, cudaGetErrorString(e));
    const unsigned tiles = static_cast<unsigned>((n_q + kTileQueries - 1) / kTileQueries);
    run_kernel(s, dense_tiled_kernel, dim3(tiles, static_cast<unsigned>(n_head)), dim3(kThreads), bytes, out, q, k, v,
               mask, sh);
    check_launch("attention_dense");
}

}  // namespace cuda
}  // namespace cactus
