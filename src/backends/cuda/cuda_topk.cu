// CUDA top_k (Backend::top_k, reference top_k_row_ref in ops/ops_ref.h): one block of 1024 threads
// per logit row. The row (up to 262144 floats, 1 MiB) is read a few times from L2: once for its
// maximum, then a radix select over 32-bit order keys, 8 bits a level from the top, finds the k-th
// largest key (the first level also sums the exponentials); a last read gathers the k winners into
// shared memory, where each finds its rank by comparing with the others. k = 1 (greedy) needs only
// the maximum's lowest id: one read after the maximum's.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

constexpr int kTopKThreads = 1024;
constexpr int kTopKWarps = kTopKThreads / 32;
constexpr int kTopKLimit = 256;  // kTopKMax (ops_ref.h): candidates held in shared memory
constexpr unsigned kAll = 0xffffffffu;

// top_k_order_key (ops_ref.h): larger key = larger logit; -0 and +0 share a key; NaN is 0.
__device__ __forceinline__ uint32_t order_key(float x) {
    if (isnan(x)) return 0u;
    if (x == 0.0f) x = 0.0f;
    const uint32_t u = __float_as_uint(x);
    return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// The float of a key (NaN for key 0; +0 for the zeros).
__device__ __forceinline__ float key_value(uint32_t key) {
    if (key == 0u) return __uint_as_float(0x7fc00000u);
    return (key & 0x80000000u) != 0 ? __uint_as_float(key & 0x7fffffffu) : __uint_as_float(~key);
}

struct TopKShared {
    uint32_t hist[256];           // a level's digit counts among the keys that match the prefix
    uint32_t warp_u[kTopKWarps];  // reductions and scans
    double warp_d[kTopKWarps];
    uint32_t cand_key[kTopKLimit];  // the gathered winners, unordered
    int32_t cand_id[kTopKLimit];
    float cand_val[kTopKLimit];
    uint32_t count;  // winners gathered so far
    uint32_t digit;  // the level's result: the digit holding the k-th key,
    uint32_t above;  // how many matching keys have a larger digit,
    uint32_t equal;  // and how many have that digit
};

__device__ uint32_t block_max_u32(uint32_t v, TopKShared& sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kAll, v, o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) sh.warp_u[warp] = v;
    __syncthreads();
    v = lane < kTopKWarps ? sh.warp_u[lane] : 0u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kAll, v, o));
    return v;
}

__device__ double block_sum_f64(double v, TopKShared& sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAll, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) sh.warp_d[warp] = v;
    __syncthreads();
    v = lane < kTopKWarps ? sh.warp_d[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAll, v, o);
    return v;
}

// Warp 0: the digit d of the level with above(d) < need <= above(d) + count(d), scanning the 256
// counts from the largest digit (lane L holds digits 8L .. 8L + 7). The counts sum to >= need >= 1,
// so exactly one lane finds it.
__device__ void select_digit(TopKShared& sh, uint32_t need) {
    const int lane = threadIdx.x & 31;
    uint32_t c[8];
    uint32_t own = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) {
        c[b] = sh.hist[lane * 8 + b];
        own += c[b];
    }
    uint32_t from_here = own;  // counts of this lane's digits and every larger one
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t u = __shfl_down_sync(kAll, from_here, o);
        if (lane + o < 32) from_here += u;
    }
    const uint32_t larger = from_here - own;
    if (larger < need && need <= from_here) {
        uint32_t seen = larger;
#pragma unroll
        for (int b = 7; b >= 0; --b) {
            if (seen + c[b] >= need) {
                sh.digit = static_cast<uint32_t>(lane * 8 + b);
                sh.above = seen;
                sh.equal = c[b];
                break;
            }
            seen += c[b];
        }
    }
}

__device__ __forceinline__ void gather(TopKShared& sh, uint32_t key, int32_t id, float val) {
    const uint32_t at = atomicAdd(&sh.count, 1u);
    sh.cand_key[at] = key;
    sh.cand_id[at] = id;
    sh.cand_val[at] = val;
}

// stats [2] of the block's row: the maximum as argmax sees it (row[0] when that is NaN, else the
// first candidate's logit) and the sum, NaN when the maximum is not finite.
__device__ void write_stats(float* stats, const float* row, float top_logit, double sum) {
    const float top = isnan(row[0]) ? row[0] : top_logit;
    stats[2 * blockIdx.x] = top;
    stats[2 * blockIdx.x + 1] = isfinite(top) ? static_cast<float>(sum) : __uint_as_float(0x7fc00000u);
}

// ids [n, k], vals [n, k], stats [n, 2], logits [n, n_vocab]; grid n blocks of kTopKThreads.
__global__ void __launch_bounds__(kTopKThreads)
    top_k_kernel(int32_t* ids, float* vals, float* stats, const float* logits, int n_vocab, int k) {
    pdl_start();
    __shared__ TopKShared sh;
    const float* row = logits + static_cast<size_t>(blockIdx.x) * static_cast<size_t>(n_vocab);
    const int t = static_cast<int>(threadIdx.x);
    const int lane = t & 31, warp = t >> 5;
    const int n_iter = (n_vocab + kTopKThreads - 1) / kTopKThreads;  // the same for every thread

    uint32_t local_max = 0;
    for (int i = t; i < n_vocab; i += kTopKThreads) local_max = max(local_max, order_key(row[i]));
    const uint32_t max_key = block_max_u32(local_max, sh);
    const float max_value = key_value(max_key);

    if (k == 1) {  // greedy: the lowest id holding the largest key, and the sum, in one more read
        double local_sum = 0.0;
        uint32_t first = 0xffffffffu;
        for (int i = t; i < n_vocab; i += kTopKThreads) {
            const float x = row[i];
            if (!isnan(x)) local_sum += static_cast<double>(expf(x - max_value));
            if (order_key(x) == max_key) first = min(first, static_cast<uint32_t>(i));
        }
        const double sum = block_sum_f64(local_sum, sh);
        first = ~block_max_u32(~first, sh);  // the smallest id: the largest complement
        if (t == 0) {
            ids[blockIdx.x] = static_cast<int32_t>(first);
            vals[blockIdx.x] = row[first];
            write_stats(stats, row, row[first], sum);
        }
        return;
    }

    // Radix select: after each level the k-th largest key is known to start with `prefix` (bits
    // under `mask`); `need` is its rank among the keys that do.
    uint32_t prefix = 0, mask = 0, need = static_cast<uint32_t>(k), equal = 0;
    double local_sum = 0.0;  // level 0: this thread's part of sum exp(x - max)
    for (int level = 0; level < 4; ++level) {
        const int shift = 24 - 8 * level;
        if (t < 256) sh.hist[t] = 0u;
        __syncthreads();
        for (int j = 0; j < n_iter; ++j) {
            const int i = j * kTopKThreads + t;
            bool match = false;
            uint32_t digit = 0;
            if (i < n_vocab) {
                const float x = row[i];
                const uint32_t key = order_key(x);
                if (level == 0 && !isnan(x)) local_sum += static_cast<double>(expf(x - max_value));
                match = (key & mask) == prefix;
                digit = (key >> shift) & 0xffu;
            }
            const unsigned matching = __ballot_sync(kAll, match);
            if (match) {  // one shared atomic per distinct digit of the warp
                const unsigned peers = __match_any_sync(matching, digit);
                if (lane == __ffs(peers) - 1) atomicAdd(&sh.hist[digit], static_cast<uint32_t>(__popc(peers)));
            }
        }
        __syncthreads();
        if (warp == 0) select_digit(sh, need);
        __syncthreads();
        need -= sh.above;
        equal = sh.equal;
        prefix |= sh.digit << shift;
        mask |= 0xffu << shift;
        if (equal == need) break;  // every key of the class is a winner: no finer digit needed
    }
    const double sum = block_sum_f64(local_sum, sh);

    // Gather: keys above the class, and the whole class when it fits; otherwise (equal full keys
    // straddling rank k) the class's lowest ids below, in id order.
    if (t == 0) sh.count = 0u;
    __syncthreads();
    const bool whole_class = equal == need;
    for (int i = t; i < n_vocab; i += kTopKThreads) {
        const float x = row[i];
        const uint32_t key = order_key(x);
        const uint32_t head = key & mask;
        if (head > prefix || (whole_class && head == prefix)) gather(sh, key, i, x);
    }
    __syncthreads();
    if (!whole_class) {
        const uint32_t first = static_cast<uint32_t>(k) - need;  // == sh.count
        uint32_t taken = 0;                                      // class members seen, in id order
        for (int j = 0; j < n_iter && taken < need; ++j) {
            const int i = j * kTopKThreads + t;
            const bool tie = i < n_vocab && order_key(row[i]) == prefix;
            const unsigned ballot = __ballot_sync(kAll, tie);
            if (lane == 0) sh.warp_u[warp] = static_cast<uint32_t>(__popc(ballot));
            __syncthreads();
            uint32_t before = 0, total = 0;
            for (int w = 0; w < kTopKWarps; ++w) {
                const uint32_t c = sh.warp_u[w];
                before += w < warp ? c : 0u;
                total += c;
            }
            const uint32_t r = taken + before + static_cast<uint32_t>(__popc(ballot & ((1u << lane) - 1u)));
            if (tie && r < need) {
                sh.cand_key[first + r] = prefix;
                sh.cand_id[first + r] = i;
                sh.cand_val[first + r] = row[i];
            }
            taken += total;
            __syncthreads();  // warp_u is rewritten by the next tile
        }
        __syncthreads();
    }

    if (t < k) {
        const uint32_t key = sh.cand_key[t];
        const int32_t id = sh.cand_id[t];
        int rank = 0;
        for (int j = 0; j < k; ++j) {
            const uint32_t other = sh.cand_key[j];
            rank += (other > key || (other == key && sh.cand_id[j] < id)) ? 1 : 0;
        }
        const size_t out = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(k) + static_cast<size_t>(rank);
        ids[out] = id;
        vals[out] = sh.cand_val[t];
        if (rank == 0) write_stats(stats, row, sh.cand_val[t], sum);
    }
}

void check_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda %s: kernel launch failed: %s", what, cudaGetErrorString(e));
}

}  // namespace

void top_k(cudaStream_t s, int32_t* ids, float* vals, float* stats, const float* logits, size_t n, size_t n_vocab,
           size_t k) {
    if (k < 1 || k > static_cast<size_t>(kTopKLimit) || k > n_vocab || n_vocab > (size_t(1) << 30) || n == 0 ||
        n > 65535u * 1024u)
        fail("cuda top_k: %zu rows of %zu logits and k = %zu are out of range", n, n_vocab, k);
    run_kernel(s, top_k_kernel, dim3(static_cast<unsigned>(n)), dim3(kTopKThreads), 0, ids, vals, stats, logits,
               static_cast<int>(n_vocab), static_cast<int>(k));
    check_launch("top_k");
}

}  // namespace cuda
}  // namespace cactus
