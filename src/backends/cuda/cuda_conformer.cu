// CUDA kernels of the conformer ops (Gemma 4's audio tower, Backend's "conformer ops"; references in
// ops/conformer_ref.h): clamp, transpose, the causal depthwise convolution and the local attention
// with relative position keys. Launchers are declared in cuda_kernels.h.
//
// Agreement with the references (tests/backends/test_backend_conformer_ops.cpp): clamp, transpose
// and depthwise_conv give the references' bits (the references are compiled with -ffp-contract=off,
// so the convolution rounds each product and each sum as written, which __fmul_rn / __fadd_rn
// repeat here); attention_local differs by tanhf / expf's last bits and its summation order.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_reduce.cuh"
#include "core/error.h"
#include "ops/conformer_ref.h"

namespace cactus {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;       // element-wise kernels
constexpr int kTile = 32;                // transpose: a 32 x 32 tile per block ...
constexpr int kTileRows = 8;             // ... read and written by 32 x 8 threads
constexpr unsigned kLocalThreads = 128;  // attention_local: 4 warps per (token, head)
// attention_local's dynamic shared memory: the 48 KiB a block has without opting in to more
// (cudaFuncSetAttribute), less block_reduce's 32 floats.
constexpr size_t kLocalMaxShared = (48u << 10) - 32 * sizeof(float);

void check_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda %s: kernel launch failed: %s", what, cudaGetErrorString(e));
}

unsigned blocks_for(size_t count, unsigned threads) {
    const size_t b = (count + threads - 1) / threads;
    return static_cast<unsigned>(b < 65535u * 16u ? (b > 0 ? b : 1) : 65535u * 16u);
}

// clamp_ref's comparisons, not fminf / fmaxf: NaN passes through and -0 stays -0, as
// std::min(std::max(x, lo), hi) does.
__global__ void clamp_kernel(float* y, const float* x, float lo, float hi, size_t count) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const float above = x[i] < lo ? lo : x[i];
        y[i] = hi < above ? hi : above;
    }
}

// y [width, n_rows] = x [n_rows, width]: block (bx, by) moves the tiles of columns [32 bx, 32 bx + 32)
// in rows 32 by, 32 (by + gridDim.y), ...; reads and writes are both whole rows of 32 floats, the
// padded tile keeps the column reads free of bank conflicts.
__global__ void transpose_kernel(float* y, const float* x, size_t n_rows, size_t width) {
    pdl_start();
    __shared__ float tile[kTile][kTile + 1];
    const size_t c0 = static_cast<size_t>(blockIdx.x) * kTile;
    for (size_t r0 = static_cast<size_t>(blockIdx.y) * kTile; r0 < n_rows;
         r0 += static_cast<size_t>(gridDim.y) * kTile) {
        for (unsigned dy = threadIdx.y; dy < kTile; dy += kTileRows) {
            const size_t r = r0 + dy, c = c0 + threadIdx.x;
            if (r < n_rows && c < width) tile[dy][threadIdx.x] = x[r * width + c];
        }
        __syncthreads();
        for (unsigned dy = threadIdx.y; dy < kTile; dy += kTileRows) {
            const size_t c = c0 + dy, r = r0 + threadIdx.x;  // y's row c, column r
            if (c < width && r < n_rows) y[c * n_rows + r] = tile[threadIdx.x][dy];
        }
        __syncthreads();  // the tile is refilled by the next rows
    }
}

// y [n, width]: y[t, c] = sum_k w[c, k] x[t - (kernel - 1) + k, c] over the taps whose row is >= 0,
// in causal_depthwise_conv_row_ref's order and rounding. One thread per output; neighbouring threads
// read neighbouring channels.
__global__ void depthwise_conv_kernel(float* y, const float* x, const float* w, size_t n, size_t width, size_t kernel) {
    pdl_start();
    const size_t count = n * width;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const size_t t = i / width, c = i % width;
        const size_t first_tap = kernel - 1 > t ? kernel - 1 - t : 0;  // taps before it read rows < 0
        float sum = 0.0f;
        for (size_t k = first_tap; k < kernel; ++k) {
            const size_t back = kernel - 1 - k;
            sum = __fadd_rn(sum, __fmul_rn(w[c * kernel + k], x[(t - back) * width + c]));
        }
        y[i] = sum;
    }
}

// One block per (token t, head h): query t sees keys s in [first, t], first = max(0, t - window + 1).
// Dynamic shared memory: qs [head_dim] (q_t * q_scale), p [t + 1 - first] (logits, then weights).
// Each warp scores keys (lanes over head_dim, one warp sum); the block takes the maximum and the sum
// of the exponentials; each thread then sums the weighted values of its dimensions in key order.
__global__ void __launch_bounds__(kLocalThreads)
    attention_local_kernel(float* out, const float* q, const float* k, const float* v, const float* rel,
                           const float* q_scale, uint32_t n_head, uint32_t head_dim, uint32_t window, float k_scale,
                           float softcap) {
    pdl_start();
    extern __shared__ float smem[];
    float* qs = smem;
    float* p = smem + head_dim;
    const size_t t = blockIdx.x / n_head, h = blockIdx.x % n_head;
    const size_t width = static_cast<size_t>(n_head) * head_dim;
    const size_t first = t + 1 >= window ? t + 1 - window : 0;
    const size_t keys = t + 1 - first;
    const size_t head = h * head_dim;
    for (uint32_t i = threadIdx.x; i < head_dim; i += blockDim.x) qs[i] = q[t * width + head + i] * q_scale[i];
    __syncthreads();

    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = blockDim.x >> 5;
    for (size_t j = warp; j < keys; j += n_warps) {
        const size_t s = first + j;
        const float* kh = k + s * width + head;
        const float* rh = rel + (t - s) * width + head;  // relative key of distance t - s
        float ac = 0.0f, bd = 0.0f;
        for (uint32_t i = lane; i < head_dim; i += 32) {
            ac += qs[i] * (kh[i] * k_scale);
            bd += qs[i] * rh[i];
        }
        ac = warp_sum(ac);
        bd = warp_sum(bd);
        if (lane == 0) p[j] = softcap * tanhf((ac + bd) / softcap);
    }
    __syncthreads();

    float max_l = -INFINITY;
    for (size_t j = threadIdx.x; j < keys; j += blockDim.x) max_l = fmaxf(max_l, p[j]);
    max_l = block_reduce(max_l, true);
    float exp_sum = 0.0f;
    for (size_t j = threadIdx.x; j < keys; j += blockDim.x) {  // a thread's own keys until the next barrier
        p[j] = expf(p[j] - max_l);
        exp_sum += p[j];
    }
    const float sum = block_reduce(exp_sum, false);
    for (size_t j = threadIdx.x; j < keys; j += blockDim.x) p[j] = p[j] / sum;
    __syncthreads();

    for (uint32_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
        float acc = 0.0f;
        for (size_t j = 0; j < keys; ++j) acc = __fadd_rn(acc, __fmul_rn(p[j], v[(first + j) * width + head + i]));
        out[t * width + head + i] = acc;
    }
}

}  // namespace

void clamp(cudaStream_t s, float* y, const float* x, float lo, float hi, size_t count) {
    if (count == 0) return;
    run_kernel(s, clamp_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, y, x, lo, hi, count);
    check_launch("clamp");
}

void transpose(cudaStream_t s, float* y, const float* x, size_t n_rows, size_t width) {
    if (n_rows == 0 || width == 0) return;
    const size_t col_tiles = (width + kTile - 1) / kTile, row_tiles = (n_rows + kTile - 1) / kTile;
    const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles < 65535 ? row_tiles : 65535));
    run_kernel(s, transpose_kernel, grid, dim3(kTile, kTileRows), 0, y, x, n_rows, width);
    check_launch("transpose");
}

void depthwise_conv(cudaStream_t s, float* y, const float* x, const float* w, size_t n, size_t width, size_t kernel) {
    if (n == 0 || width == 0) return;
    run_kernel(s, depthwise_conv_kernel, dim3(blocks_for(n * width, kThreads)), dim3(kThreads), 0, y, x, w, n, width,
               kernel);
    check_launch("depthwise_conv");
}

bool attention_local(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* rel,
                     const float* q_scale, size_t n, const LocalAttention& a) {
    // The most keys a query sees; as the kernel's window it sees the same keys (a window of n or more
    // reaches row 0 from every row) and fits 32 bits.
    const size_t keys = a.window < n ? a.window : n;
    const size_t shared = (a.head_dim + keys) * sizeof(float);
    if (shared > kLocalMaxShared || n * a.n_head > 0x7fffffffu) return false;
    if (n == 0) return true;
    run_kernel(s, attention_local_kernel, dim3(static_cast<unsigned>(n * a.n_head)), dim3(kLocalThreads), shared, out,
               q, k, v, rel, q_scale, static_cast<uint32_t>(a.n_head), static_cast<uint32_t>(a.head_dim),
               static_cast<uint32_t>(keys), a.k_scale, a.softcap);
    check_launch("attention_local");
    return true;
}

}  // namespace cuda
}  // namespace cactus
