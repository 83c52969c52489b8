// CUDA kernels of the KV cache (row store as f16, int8 groups or f32), attention over the cache (causal,
// sliding rings with sinks: masked by row positions, as attention_row_visible), dense attention, and
// the im2col step of the convolutions.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "backends/cuda/cuda_attention_mask.cuh"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_reduce.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

constexpr int kThreads = 128;  // attention block: 4 warps
constexpr int kTile = 64;      // rows scored per step of the online softmax
constexpr int kMaxAcc = 4;     // head_dim_v <= kThreads * kMaxAcc
constexpr int kGroup = 32;     // int8 scale group (kKvGroup)
// Dense attention of fewer (query, head) pairs than 4 per SM over at least 256 rows runs as clusters
// of 8 blocks per pair, each attending over an eighth of the rows.
constexpr int kDenseSplit = 8;
constexpr size_t kDenseSplitBelowPairsPerSm = 4;
constexpr size_t kDenseSplitRows = 256;

namespace cg = cooperative_groups;

// Streaming multiprocessors of the current device (0 when it cannot be read: no split then).
size_t multiprocessors() {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return static_cast<size_t>(count);
}

void check_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda %s: kernel launch failed: %s", what, cudaGetErrorString(e));
}

// ---- KV store ---------------------------------------------------------------------------------------

// Quantizes one group of up to 32 elements (one per lane) as kv_quantize_i8 does.
__device__ void quantize_group(int8_t* q, float* scale, const float* x, int n, int lane) {
    const float v = lane < n ? x[lane] : 0.0f;
    const float amax = warp_max(fabsf(v));
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    if (lane < n) q[lane] = static_cast<int8_t>(fmaxf(-127.0f, fminf(127.0f, rintf(v * inv))));
    if (lane == 0) *scale = s;
}

__device__ void store_int8_row(int8_t* dst, float* scales, const float* src, int width, int n_head) {
    const int head_dim = width / n_head;
    const int groups = (head_dim + kGroup - 1) / kGroup;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    for (int item = warp; item < n_head * groups; item += blockDim.x >> 5) {
        const int h = item / groups;
        const int g = item % groups;
        const int begin = h * head_dim + g * kGroup;
        const int n = min(kGroup, head_dim - g * kGroup);
        quantize_group(dst + begin, scales + item, src + begin, n, lane);
    }
}

__global__ void kv_store_kernel(const KvStoreDesc* desc, const float* k, const float* v, int k_width, int v_width,
                                int n_head_kv, KvType type) {
    pdl_start();
    const int t = blockIdx.x;
    const KvStoreDesc d = desc[t];
    const float* kr = k + static_cast<size_t>(t) * k_width;
    const float* vr = v + static_cast<size_t>(t) * v_width;
    if (type == KvType::F16) {
        __half* kd = static_cast<__half*>(d.k);
        __half* vd = static_cast<__half*>(d.v);
        for (int i = threadIdx.x; i < k_width; i += blockDim.x) kd[i] = __float2half_rn(kr[i]);
        for (int i = threadIdx.x; i < v_width; i += blockDim.x) vd[i] = __float2half_rn(vr[i]);
        return;
    }
    if (type == KvType::F32) {
        float* kd = static_cast<float*>(d.k);
        float* vd = static_cast<float*>(d.v);
        for (int i = threadIdx.x; i < k_width; i += blockDim.x) kd[i] = kr[i];
        for (int i = threadIdx.x; i < v_width; i += blockDim.x) vd[i] = vr[i];
        return;
    }
    store_int8_row(static_cast<int8_t*>(d.k), d.ks, kr, k_width, n_head_kv);
    store_int8_row(static_cast<int8_t*>(d.v), d.vs, vr, v_width, n_head_kv);
}

// ---- attention ---------------------------------------------------------------------------------------

// Rows of one KV head of the cache: f16, int8 with group scales or f32 (TYPE); masked by positions.
template <KvType TYPE>
struct CacheRows {
    const KvAttnDesc* d;
    int kvh;
    const KvAttnShape* sh;
    int gph_k, gph_v;
    __device__ int n_rows() const { return d->n_rows; }
    __device__ float bias(int r) const {
        const int32_t rp = d->row_pos[r];
        bool visible = rp >= 0 && static_cast<int64_t>(rp) <= static_cast<int64_t>(d->q_pos) + d->ahead;
        if (visible && !(rp < static_cast<int64_t>(d->sinks))) {
            visible = d->window == 0 || static_cast<int64_t>(d->q_pos) - rp < static_cast<int64_t>(d->window);
        }
        return visible ? 0.0f : -INFINITY;
    }
    __device__ float key(int r, int i) const {
        const size_t at = static_cast<size_t>(r) * sh->k_width + kvh * sh->head_dim_k + i;
        if constexpr (TYPE == KvType::F16) return __half2float(static_cast<const __half*>(d->k)[at]);
        if constexpr (TYPE == KvType::F32) return static_cast<const float*>(d->k)[at];
        const float s = d->ks[static_cast<size_t>(r) * sh->k_groups + kvh * gph_k + i / kGroup];
        return s * static_cast<float>(static_cast<const int8_t*>(d->k)[at]);
    }
    __device__ float value(int r, int i) const {
        const size_t at = static_cast<size_t>(r) * sh->v_width + kvh * sh->head_dim_v + i;
        if constexpr (TYPE == KvType::F16) return __half2float(static_cast<const __half*>(d->v)[at]);
        if constexpr (TYPE == KvType::F32) return static_cast<const float*>(d->v)[at];
        const float s = d->vs[static_cast<size_t>(r) * sh->v_groups + kvh * gph_v + i / kGroup];
        return s * static_cast<float>(static_cast<const int8_t*>(d->v)[at]);
    }
};

// Dense f32 keys and values with an optional additive mask and a causal limit.
struct DenseRows {
    const float* k;
    const float* v;
    const float* mask_row;  // [n_kv] or null
    int n_kv, k_stride, v_stride, koff, voff;
    int limit;  // keys j > limit are hidden (causal); n_kv - 1 otherwise
    __device__ int n_rows() const { return n_kv; }
    __device__ float bias(int r) const {
        if (r > limit) return -INFINITY;
        return mask_row ? mask_row[r] : 0.0f;
    }
    __device__ float key(int r, int i) const { return k[static_cast<size_t>(r) * k_stride + koff + i]; }
    __device__ float value(int r, int i) const { return v[static_cast<size_t>(r) * v_stride + voff + i]; }
};

// Scores of rows [r0, r0 + kTile) into score[] (-inf where hidden): one warp per row, lanes over
// the head dimension.
template <class Rows>
__device__ void score_tile(float* score, const float* qs, int dk, float scale, const Rows& rows, int r0) {
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int n_rows = rows.n_rows();
    for (int j = warp; j < kTile; j += kThreads / 32) {
        const int r = r0 + j;
        float s = -INFINITY;
        if (r < n_rows) {
            const float b = rows.bias(r);
            if (b != -INFINITY) {
                float dot = 0.0f;
                for (int i = lane; i < dk; i += 32) dot += qs[i] * rows.key(r, i);
                s = warp_sum(dot) * scale + b;
            }
        }
        if (lane == 0) score[j] = s;
    }
}

// sum + the weighted values of dim d over rows [r0, r0 + n_tile). Every row of the view is read (a
// hidden row's value may be anything, so its zero weight selects 0 rather than multiplying): loads
// that do not hang on a branch are in flight together, 8 at a time.
template <class Rows>
__device__ __forceinline__ float accumulate_values(float sum, const float* weight, const Rows& rows, int r0, int n_tile,
                                                   int d) {
#pragma unroll 8
    for (int j = 0; j < n_tile; ++j) {
        const float w = weight[j];
        const float v = rows.value(r0 + j, d);
        sum += w != 0.0f ? w * v : 0.0f;
    }
    return sum;
}

// out [dv] = softmax(scale q.k_r + bias_r) v_r over the rows, in tiles of kTile rows.
// ROUND (f16 caches): like the CPU path (and llama.cpp's f16 KV path) the query and the normalized
// attention weights are rounded to f16, so a second pass recomputes the scores once the row max
// and the sum are known. Otherwise (int8 and f32 caches, dense) one pass with an online softmax.
// What attend_rows leaves: per thread the output dims threadIdx.x + a * kThreads, normalized with
// ROUND, else to be divided by l; m the max score (-inf when no row was visible).
struct Partial {
    float m, l;
    float acc[kMaxAcc];
};

template <bool ROUND, class Rows>
__device__ Partial attend_rows(const float* q, int dk, int dv, float scale, const Rows& rows) {
    __shared__ float qs[512];
    __shared__ float score[kTile];
    __shared__ float weight[kTile];
    for (int i = threadIdx.x; i < dk; i += blockDim.x) qs[i] = ROUND ? round_half(q[i]) : q[i];
    __syncthreads();
    float m = -INFINITY;
    float l = 0.0f;
    float acc[kMaxAcc] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int n_rows = rows.n_rows();
    for (int r0 = 0; r0 < n_rows; r0 += kTile) {
        score_tile(score, qs, dk, scale, rows, r0);
        __syncthreads();
        float tile_max = -INFINITY;
        for (int j = 0; j < kTile; ++j) tile_max = fmaxf(tile_max, score[j]);
        const float new_m = fmaxf(m, tile_max);
        if (new_m == -INFINITY) {
            __syncthreads();
            continue;
        }
        if (threadIdx.x < kTile) weight[threadIdx.x] = expf(score[threadIdx.x] - new_m);
        __syncthreads();
        const float corr = expf(m - new_m);  // 0 while m is -inf
        float tile_sum = 0.0f;
        for (int j = 0; j < kTile; ++j) tile_sum += weight[j];
        l = l * corr + tile_sum;
        if (!ROUND) {
            const int n_tile = min(kTile, n_rows - r0);
#pragma unroll
            for (int a = 0; a < kMaxAcc; ++a) {
                const int d = threadIdx.x + a * kThreads;
                if (d >= dv) break;
                acc[a] = accumulate_values(acc[a] * corr, weight, rows, r0, n_tile, d);
            }
        }
        m = new_m;
        __syncthreads();
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    if (ROUND && l > 0.0f) {
        for (int r0 = 0; r0 < n_rows; r0 += kTile) {
            score_tile(score, qs, dk, scale, rows, r0);
            __syncthreads();
            if (threadIdx.x < kTile) weight[threadIdx.x] = round_half(expf(score[threadIdx.x] - m) * inv);
            __syncthreads();
            const int n_tile = min(kTile, n_rows - r0);
#pragma unroll
            for (int a = 0; a < kMaxAcc; ++a) {
                const int d = threadIdx.x + a * kThreads;
                if (d >= dv) break;
                acc[a] = accumulate_values(acc[a], weight, rows, r0, n_tile, d);
            }
            __syncthreads();
        }
    }
    Partial p;
    p.m = m;
    p.l = l;
#pragma unroll
    for (int a = 0; a < kMaxAcc; ++a) p.acc[a] = acc[a];
    return p;
}

template <bool ROUND, class Rows>
__device__ void attend(float* out, const float* q, int dk, int dv, float scale, const Rows& rows) {
    const Partial p = attend_rows<ROUND>(q, dk, dv, scale, rows);
    const float norm = ROUND ? 1.0f : (p.l > 0.0f ? 1.0f / p.l : 0.0f);
#pragma unroll
    for (int a = 0; a < kMaxAcc; ++a) {
        const int d = threadIdx.x + a * kThreads;
        if (d < dv) out[d] = p.acc[a] * norm;
    }
}

// Rows [begin, end) of another row set.
template <class Rows>
struct RowRange {
    const Rows& rows;
    int begin, end;
    __device__ int n_rows() const { return end - begin; }
    __device__ float bias(int r) const { return rows.bias(begin + r); }
    __device__ float key(int r, int i) const { return rows.key(begin + r, i); }
    __device__ float value(int r, int i) const { return rows.value(begin + r, i); }
};

// attend<false> with the rows split over the kDenseSplit blocks of a cluster: each attends over its
// share, then the partial maxima, sums and outputs are combined through distributed shared memory
// (in block order), block c writing every kDenseSplit-th output dim.
template <class Rows>
__device__ void attend_split(float* out, const float* q, int dk, int dv, float scale, const Rows& rows) {
    __shared__ float part_m, part_l;
    __shared__ float part_acc[kThreads * kMaxAcc];
    const int c = static_cast<int>(blockIdx.z);
    const int n = rows.n_rows();
    const int chunk = (n + kDenseSplit - 1) / kDenseSplit;
    const int begin = min(n, c * chunk);
    const RowRange<Rows> mine{rows, begin, min(n, begin + chunk)};
    const Partial p = attend_rows<false>(q, dk, dv, scale, mine);
    if (threadIdx.x == 0) {
        part_m = p.m;
        part_l = p.l;
    }
#pragma unroll
    for (int a = 0; a < kMaxAcc; ++a) part_acc[threadIdx.x + a * kThreads] = p.acc[a];
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    float m = -INFINITY;
    for (int b = 0; b < kDenseSplit; ++b) m = fmaxf(m, *cluster.map_shared_rank(&part_m, b));
    float w[kDenseSplit];
    float l = 0.0f;
    for (int b = 0; b < kDenseSplit; ++b) {
        const float mb = *cluster.map_shared_rank(&part_m, b);
        w[b] = mb == -INFINITY ? 0.0f : expf(mb - m);
        l += *cluster.map_shared_rank(&part_l, b) * w[b];
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = static_cast<int>(threadIdx.x) * kDenseSplit + c; d < dv; d += kThreads * kDenseSplit) {
        float sum = 0.0f;
        for (int b = 0; b < kDenseSplit; ++b) {
            if (w[b] != 0.0f) sum += cluster.map_shared_rank(part_acc, b)[d] * w[b];
        }
        out[d] = sum * inv;
    }
    cluster.sync();  // no block leaves while others read its shared memory
}

// One block per (token, query head); only f16 rows round the query and the weights.
template <KvType TYPE>
__global__ void __launch_bounds__(kThreads)
    attention_kv_kernel(float* out, const float* q, const KvAttnDesc* desc, KvAttnShape sh) {
    pdl_start();
    const int t = blockIdx.x / static_cast<int>(sh.n_head);
    const int h = blockIdx.x % static_cast<int>(sh.n_head);
    const int group = static_cast<int>(sh.n_head / sh.n_head_kv);
    const int dk = static_cast<int>(sh.head_dim_k);
    const int dv = static_cast<int>(sh.head_dim_v);
    const KvAttnDesc d = desc[t];
    const CacheRows<TYPE> rows{&d, h / group, &sh, (dk + kGroup - 1) / kGroup, (dv + kGroup - 1) / kGroup};
    attend<TYPE == KvType::F16>(out + static_cast<size_t>(t) * sh.n_head * dv + h * dv,
                                q + static_cast<size_t>(t) * sh.n_head * dk + h * dk, dk, dv, sh.scale, rows);
}

// ---- attention of a tile of queries over shared cache rows (prompts, verification steps) -------------
// One block per (16 queries, query head) when the batch's tokens all see rows of one cache from the
// same first row (a prompt of one sequence): each step loads 32 rows of keys (and values) into
// shared memory once for all 16 queries instead of once per query, and skips steps whose rows no
// query sees (the causal future of the tile). Per query the arithmetic is attend()'s: the same
// masking, the f16 rounding of the query and of the normalized weights for f16 caches (two passes),
// an online softmax otherwise. Warp w scores queries w, w + 4, w + 8, w + 12 (lane = row); thread t
// accumulates output dims t and t + 128 of all 16 queries.
constexpr int kQueries = 16;
constexpr int kKeys = 32;
constexpr int kQueriesPerWarp = kQueries / (kThreads / 32);
constexpr int kTiledMaxDim = 2 * kThreads;
// The tiled kernel is used up to this head dim. Its blocks walk the rows in sequence, and there are
// 16 times fewer of them than per-query blocks: on an H100 at pp512 it took 0.60x the per-query
// kernel's time at head dim 64 (qwen2.5-coder-0.5b; 0.89x smollm2), 1.06x at 128 (qwen2.5-coder-1.5b)
// and 2.3x at 256 (gemma3-270m, 4 heads: 128 blocks for 132 SMs). Larger dims pass the device tests
// too (kTiledMaxDim) but are slower until the rows are split across blocks.
constexpr int kTiledFasterDim = 64;
static_assert(kTiledFasterDim <= kTiledMaxDim, "each thread accumulates at most 2 output dims of a query");

enum class TileMode { stats, weighted, online };  // f16 pass 1, f16 pass 2, int8/f32 single pass

size_t tiled_shared_floats(int dk, int dv) {
    return static_cast<size_t>(kQueries) * dk + static_cast<size_t>(kKeys) * (dk + 1) +
           static_cast<size_t>(kKeys) * dv + kQueries * kKeys + kQueries;
}

struct TiledState {
    float m[kQueriesPerWarp];  // per query of this warp: running max of the scores
    float l[kQueriesPerWarp];  // and sum of exp(score - m)
    float acc[kQueries][2];    // output dims threadIdx.x and + kThreads of every query
};

// One step of rows [r0, r0 + kKeys). Returns without work when no query of the tile sees any row.
template <KvType TYPE, TileMode MODE>
__device__ __forceinline__ void tiled_step(TiledState& st, const CacheRows<TYPE>& rows, const KvAttnDesc* qd, int nq,
                                           int max_rows, int r0, int dk, int dv, float scale, float* qs, float* kt,
                                           float* vt, float* w, float* corr, int32_t* rpos) {
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    if (threadIdx.x < kKeys) {
        const int r = r0 + static_cast<int>(threadIdx.x);
        rpos[threadIdx.x] = r < max_rows ? rows.d->row_pos[r] : -1;
    }
    __syncthreads();
    bool seen[kQueriesPerWarp];
    bool any = false;
#pragma unroll
    for (int a = 0; a < kQueriesPerWarp; ++a) {
        const int i = warp + a * (kThreads / 32);
        seen[a] = i < nq && row_visible(qd[i], r0 + lane, rpos[lane]);
        any = any || seen[a];
    }
    if (!__syncthreads_or(any)) return;
    const int kstride = dk + 1;
    for (int e = static_cast<int>(threadIdx.x); e < kKeys * dk; e += kThreads) {
        const int j = e / dk, c = e % dk;
        kt[j * kstride + c] = r0 + j < max_rows ? rows.key(r0 + j, c) : 0.0f;
    }
    if (MODE != TileMode::stats) {
        for (int e = static_cast<int>(threadIdx.x); e < kKeys * dv; e += kThreads) {
            const int j = e / dv, c = e % dv;
            vt[j * dv + c] = r0 + j < max_rows ? rows.value(r0 + j, c) : 0.0f;
        }
    }
    __syncthreads();
#pragma unroll
    for (int a = 0; a < kQueriesPerWarp; ++a) {
        const int i = warp + a * (kThreads / 32);
        float s = -INFINITY;
        if (seen[a]) {
            float dot = 0.0f;
            const float* qi = qs + i * dk;
            const float* kj = kt + lane * kstride;
            for (int c = 0; c < dk; ++c) dot += qi[c] * kj[c];
            s = dot * scale;
        }
        if (MODE == TileMode::weighted) {
            const float inv = st.l[a] > 0.0f ? 1.0f / st.l[a] : 0.0f;
            w[i * kKeys + lane] = s == -INFINITY ? 0.0f : round_half(expf(s - st.m[a]) * inv);
            continue;
        }
        const float new_m = fmaxf(st.m[a], warp_max(s));
        if (new_m == -INFINITY) {
            if (MODE == TileMode::online) {
                w[i * kKeys + lane] = 0.0f;
                if (lane == 0) corr[i] = 1.0f;
            }
            continue;
        }
        const float p = expf(s - new_m);        // 0 where hidden
        const float c = expf(st.m[a] - new_m);  // 0 while m is -inf
        st.l[a] = st.l[a] * c + warp_sum(p);
        st.m[a] = new_m;
        if (MODE == TileMode::online) {
            w[i * kKeys + lane] = p;
            if (lane == 0) corr[i] = c;
        }
    }
    if (MODE == TileMode::stats) {
        __syncthreads();  // kt is reloaded by the next step
        return;
    }
    __syncthreads();
#pragma unroll
    for (int b = 0; b < 2; ++b) {
        const int d = static_cast<int>(threadIdx.x) + b * kThreads;
        if (d >= dv) break;
        if (MODE == TileMode::online) {
#pragma unroll
            for (int i = 0; i < kQueries; ++i) st.acc[i][b] *= corr[i];
        }
        for (int j = 0; j < kKeys; ++j) {
            const float v = vt[j * dv + d];
#pragma unroll
            for (int i = 0; i < kQueries; ++i) {
                const float wij = w[i * kKeys + j];
                st.acc[i][b] += wij != 0.0f ? wij * v : 0.0f;  // hidden rows' values may be anything
            }
        }
    }
    __syncthreads();
}

template <KvType TYPE>
__global__ void __launch_bounds__(kThreads)
    attention_kv_tiled_kernel(float* out, const float* q, const KvAttnDesc* desc, int n, KvAttnShape sh) {
    pdl_start();
    extern __shared__ float smem[];
    __shared__ KvAttnDesc qd[kQueries];
    __shared__ int32_t rpos[kKeys];
    __shared__ int shared_rows, max_rows;
    const int t0 = static_cast<int>(blockIdx.x) * kQueries;
    const int h = static_cast<int>(blockIdx.y);
    const int nq = min(kQueries, n - t0);
    const int n_head = static_cast<int>(sh.n_head);
    const int kvh = h / (n_head / static_cast<int>(sh.n_head_kv));
    const int dk = static_cast<int>(sh.head_dim_k);
    const int dv = static_cast<int>(sh.head_dim_v);
    const int gk = (dk + kGroup - 1) / kGroup, gv = (dv + kGroup - 1) / kGroup;
    if (static_cast<int>(threadIdx.x) < nq) qd[threadIdx.x] = desc[t0 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        bool same = true;
        int most = 0;
        for (int i = 0; i < nq; ++i) {
            same = same && qd[i].k == qd[0].k && qd[i].v == qd[0].v && qd[i].ks == qd[0].ks && qd[i].vs == qd[0].vs &&
                   qd[i].row_pos == qd[0].row_pos;
            most = max(most, qd[i].n_rows);
        }
        shared_rows = same;
        max_rows = most;
    }
    __syncthreads();
    if (!shared_rows) {  // block-uniform: the tokens see different rows, each attends alone
        for (int i = 0; i < nq; ++i) {
            const CacheRows<TYPE> rows{&qd[i], kvh, &sh, gk, gv};
            const size_t t = static_cast<size_t>(t0 + i);
            attend<TYPE == KvType::F16>(out + t * n_head * dv + h * dv, q + t * n_head * dk + h * dk, dk, dv, sh.scale,
                                        rows);
            __syncthreads();
        }
        return;
    }
    float* qs = smem;                    // [kQueries][dk]
    float* kt = qs + kQueries * dk;      // [kKeys][dk + 1]
    float* vt = kt + kKeys * (dk + 1);   // [kKeys][dv]
    float* w = vt + kKeys * dv;          // [kQueries][kKeys]
    float* corr = w + kQueries * kKeys;  // [kQueries]
    constexpr bool kRound = TYPE == KvType::F16;
    for (int e = static_cast<int>(threadIdx.x); e < kQueries * dk; e += kThreads) {
        const int i = e / dk, c = e % dk;
        const float v = i < nq ? q[static_cast<size_t>(t0 + i) * n_head * dk + h * dk + c] : 0.0f;
        qs[e] = kRound ? round_half(v) : v;
    }
    __syncthreads();
    const CacheRows<TYPE> rows{&qd[0], kvh, &sh, gk, gv};
    TiledState st;
#pragma unroll
    for (int a = 0; a < kQueriesPerWarp; ++a) {
        st.m[a] = -INFINITY;
        st.l[a] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kQueries; ++i) st.acc[i][0] = st.acc[i][1] = 0.0f;
    const int rows_n = max_rows;
    if constexpr (kRound) {
        for (int r0 = 0; r0 < rows_n; r0 += kKeys)
            tiled_step<TYPE, TileMode::stats>(st, rows, qd, nq, rows_n, r0, dk, dv, sh.scale, qs, kt, vt, w, corr,
                                              rpos);
        for (int r0 = 0; r0 < rows_n; r0 += kKeys)
            tiled_step<TYPE, TileMode::weighted>(st, rows, qd, nq, rows_n, r0, dk, dv, sh.scale, qs, kt, vt, w, corr,
                                                 rpos);
    } else {
        for (int r0 = 0; r0 < rows_n; r0 += kKeys)
            tiled_step<TYPE, TileMode::online>(st, rows, qd, nq, rows_n, r0, dk, dv, sh.scale, qs, kt, vt, w, corr,
                                               rpos);
        const int warp = static_cast<int>(threadIdx.x) >> 5;
        const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
        for (int a = 0; a < kQueriesPerWarp; ++a) {
            const int i = warp + a * (kThreads / 32);
            if (lane == 0) corr[i] = st.l[a] > 0.0f ? 1.0f / st.l[a] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kQueries; ++i) {
            st.acc[i][0] *= corr[i];
            st.acc[i][1] *= corr[i];
        }
    }
#pragma unroll
    for (int b = 0; b < 2; ++b) {
        const int d = static_cast<int>(threadIdx.x) + b * kThreads;
        if (d >= dv) break;
#pragma unroll
        for (int i = 0; i < kQueries; ++i)
            if (i < nq) out[static_cast<size_t>(t0 + i) * n_head * dv + h * dv + d] = st.acc[i][b];
    }
}

// The rows query i of head h sees in dense attention.
__device__ __forceinline__ DenseRows dense_rows(const float* k, const float* v, const float* mask, int i, int h,
                                                int n_q, int n_kv, int n_head, int n_head_kv, int dk, int dv,
                                                bool causal) {
    const int kvh = h / (n_head / n_head_kv);
    const int shift = n_kv >= n_q ? n_kv - n_q : 0;
    return DenseRows{k,
                     v,
                     mask ? mask + static_cast<size_t>(i) * n_kv : nullptr,
                     n_kv,
                     n_head_kv * dk,
                     n_head_kv * dv,
                     kvh * dk,
                     kvh * dv,
                     causal ? i + shift : n_kv - 1};
}

__global__ void __launch_bounds__(kThreads)
    attention_dense_kernel(float* out, const float* q, const float* k, const float* v, const float* mask, int n_q,
                           int n_kv, int n_head, int n_head_kv, int dk, int dv, float scale, bool causal) {
    pdl_start();
    const int i = blockIdx.x / n_head;
    const int h = blockIdx.x % n_head;
    const DenseRows rows = dense_rows(k, v, mask, i, h, n_q, n_kv, n_head, n_head_kv, dk, dv, causal);
    attend<false>(out + static_cast<size_t>(i) * n_head * dv + h * dv,
                  q + static_cast<size_t>(i) * n_head * dk + h * dk, dk, dv, scale, rows);
}

// Few (query, head) pairs over many rows, heads wider than cuda_attention_dense.cu's 128 (which take
// the narrower ones): each pair's rows split over a cluster of kDenseSplit blocks.
__global__ void __cluster_dims__(1, 1, kDenseSplit) __launch_bounds__(kThreads)
    attention_dense_split_kernel(float* out, const float* q, const float* k, const float* v, const float* mask, int n_q,
                                 int n_kv, int n_head, int n_head_kv, int dk, int dv, float scale, bool causal) {
    pdl_start();
    const int i = blockIdx.x / n_head;
    const int h = blockIdx.x % n_head;
    const DenseRows rows = dense_rows(k, v, mask, i, h, n_q, n_kv, n_head, n_head_kv, dk, dv, causal);
    attend_split(out + static_cast<size_t>(i) * n_head * dv + h * dv, q + static_cast<size_t>(i) * n_head * dk + h * dk,
                 dk, dv, scale, rows);
}

__global__ void im2col_1d_kernel(float* col, const float* x, size_t n_t, size_t n_in, size_t n_t_out, size_t kernel,
                                 size_t stride, size_t pad) {
    pdl_start();
    const size_t k_width = n_in * kernel;
    const size_t count = n_t_out * k_width;
    for (size_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
        const size_t t = e / k_width;
        const size_t ch = (e % k_width) / kernel;
        const size_t k = e % kernel;
        const size_t src = t * stride + k;
        col[e] = (src < pad || src - pad >= n_t) ? 0.0f : x[(src - pad) * n_in + ch];
    }
}

__global__ void im2col_2d_kernel(float* col, const float* x, size_t n_in, size_t height, size_t width, size_t h_out,
                                 size_t w_out, size_t kh, size_t kw, size_t stride, size_t pad) {
    pdl_start();
    const size_t k_width = n_in * kh * kw;
    const size_t count = h_out * w_out * k_width;
    for (size_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
        const size_t p = e / k_width;
        const size_t rest = e % k_width;
        const size_t ch = rest / (kh * kw);
        const size_t ky = rest / kw % kh;
        const size_t kx = rest % kw;
        const size_t iy = p / w_out * stride + ky;
        const size_t ix = p % w_out * stride + kx;
        const bool inside = iy >= pad && iy - pad < height && ix >= pad && ix - pad < width;
        col[e] = inside ? x[ch * height * width + (iy - pad) * width + (ix - pad)] : 0.0f;
    }
}

unsigned blocks_for(size_t count) {
    const size_t b = (count + 255) / 256;
    return static_cast<unsigned>(b == 0 ? 1 : (b > 1048576 ? 1048576 : b));
}

}  // namespace

void kv_store(cudaStream_t s, const KvStoreDesc* desc, const float* k, const float* v, size_t n, size_t k_width,
              size_t v_width, size_t n_head_kv, KvType type) {
    if (n == 0) return;
    run_kernel(s, kv_store_kernel, dim3(static_cast<unsigned>(n)), dim3(128), 0, desc, k, v, static_cast<int>(k_width),
               static_cast<int>(v_width), static_cast<int>(n_head_kv), type);
    check_launch("kv_store");
}

namespace {

template <KvType TYPE>
void launch_tiled(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                  const KvAttnShape& shape) {
    const size_t bytes =
        tiled_shared_floats(static_cast<int>(shape.head_dim_k), static_cast<int>(shape.head_dim_v)) * sizeof(float);
    const cudaError_t e = cudaFuncSetAttribute(attention_kv_tiled_kernel<TYPE>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) fail("cuda attention_kv: shared memory of %zu bytes: %s", bytes, cudaGetErrorString(e));
    const dim3 grid(static_cast<unsigned>((n + kQueries - 1) / kQueries), static_cast<unsigned>(shape.n_head));
    run_kernel(s, attention_kv_tiled_kernel<TYPE>, grid, dim3(kThreads), bytes, out, q, desc, static_cast<int>(n),
               shape);
}

void attention_kv_tiled(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                        const KvAttnShape& shape) {
    switch (shape.type) {
        case KvType::F16:
            launch_tiled<KvType::F16>(s, out, q, desc, n, shape);
            break;
        case KvType::I8:
            launch_tiled<KvType::I8>(s, out, q, desc, n, shape);
            break;
        case KvType::F32:
            launch_tiled<KvType::F32>(s, out, q, desc, n, shape);
            break;
    }
    check_launch("attention_kv");
}

}  // namespace

void attention_kv(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                  const KvAttnShape& shape, bool shared_rows) {
    if (n == 0) return;
    if (shape.head_dim_k > 512 || shape.head_dim_v > static_cast<size_t>(kThreads * kMaxAcc)) {
        fail("cuda attention_kv: head dims %zu/%zu exceed 512", shape.head_dim_k, shape.head_dim_v);
    }
    if (shared_rows && attention_kv_mma_fits(shape)) {  // a decode step too: its warps split the rows
        attention_kv_mma(s, out, q, desc, n, shape);
        return;
    }
    if (shared_rows && n > 1 && shape.head_dim_k <= kTiledFasterDim && shape.head_dim_v <= kTiledFasterDim) {
        attention_kv_tiled(s, out, q, desc, n, shape);
        return;
    }
    const unsigned blocks = static_cast<unsigned>(n * shape.n_head);
    switch (shape.type) {
        case KvType::F16:
            run_kernel(s, attention_kv_kernel<KvType::F16>, dim3(blocks), dim3(kThreads), 0, out, q, desc, shape);
            break;
        case KvType::I8:
            run_kernel(s, attention_kv_kernel<KvType::I8>, dim3(blocks), dim3(kThreads), 0, out, q, desc, shape);
            break;
        case KvType::F32:
            run_kernel(s, attention_kv_kernel<KvType::F32>, dim3(blocks), dim3(kThreads), 0, out, q, desc, shape);
            break;
    }
    check_launch("attention_kv");
}

void attention_dense(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* mask,
                     size_t n_q, size_t n_kv, size_t n_head, size_t n_head_kv, size_t dk, size_t dv, float scale,
                     bool causal) {
    if (n_q == 0) return;
    if (n_kv > 0 && attention_dense_fits(dk, dv)) {
        attention_dense_f32(s, out, q, k, v, mask, n_q, n_kv, n_head, n_head_kv, dk, dv, scale, causal);
        return;
    }
    if (dk > 512 || dv > static_cast<size_t>(kThreads * kMaxAcc)) {
        fail("cuda attention_dense: head dims %zu/%zu exceed 512", dk, dv);
    }
    const unsigned pairs = static_cast<unsigned>(n_q * n_head);
    if (n_kv >= kDenseSplitRows && pairs < kDenseSplitBelowPairsPerSm * multiprocessors()) {
        run_kernel(s, attention_dense_split_kernel, dim3(pairs, 1, kDenseSplit), dim3(kThreads), 0, out, q, k, v, mask,
                   static_cast<int>(n_q), static_cast<int>(n_kv), static_cast<int>(n_head), static_cast<int>(n_head_kv),
                   static_cast<int>(dk), static_cast<int>(dv), scale, causal);
        check_launch("attention_dense");
        return;
    }
    run_kernel(s, attention_dense_kernel, dim3(pairs), dim3(kThreads), 0, out, q, k, v, mask, static_cast<int>(n_q),
               static_cast<int>(n_kv), static_cast<int>(n_head), static_cast<int>(n_head_kv), static_cast<int>(dk),
               static_cast<int>(dv), scale, causal);
    check_launch("attention_dense");
}

void copy(cudaStream_t s, void* dst, const void* src, size_t n) {
    enqueue_copy(s, dst, src, n, cudaMemcpyDeviceToDevice);
}

void im2col_1d(cudaStream_t s, float* col, const float* x, size_t n_t, size_t n_in, size_t n_t_out, size_t kernel,
               size_t stride, size_t pad) {
    run_kernel(s, im2col_1d_kernel, dim3(blocks_for(n_t_out * n_in * kernel)), dim3(256), 0, col, x, n_t, n_in, n_t_out,
               kernel, stride, pad);
    check_launch("im2col_1d");
}

void im2col_2d(cudaStream_t s, float* col, const float* x, size_t n_in, size_t height, size_t width, size_t h_out,
               size_t w_out, size_t kh, size_t kw, size_t stride, size_t pad) {
    run_kernel(s, im2col_2d_kernel, dim3(blocks_for(h_out * w_out * n_in * kh * kw)), dim3(256), 0, col, x, n_in,
               height, width, h_out, w_out, kh, kw, stride, pad);
    check_launch("im2col_2d");
}

}  // namespace cuda
}  // namespace cactus
