// gemm_f16: dequantize W to f16 by chunks of rows, round x to f16 under a power-of-two scale, one
// cublasGemmEx per chunk. gemm_f16_weights: x split in two f16 parts under that scale, two
// cublasGemmEx on the f16 weights as they are. See cuda_gemm.h.
#include <cuda_fp16.h>

#include <algorithm>

#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_quant.cuh"
#include "backends/cuda/cuda_reduce.cuh"

namespace cactus {
namespace cuda {

namespace {

constexpr size_t kAlign = 256;
constexpr unsigned kThreads = 256;
constexpr unsigned kMaxPartials = 256;             // blocks of the max pass; each later block reads them all
constexpr size_t kChunkHalves = size_t(16) << 20;  // W is dequantized at most 32 MiB of f16 at a time
// x / scale has its largest magnitude in [2^14, 2^15): below f16's largest finite value (65504),
// and 2^28 above the smallest normal one, so the scale (a power of two) costs no precision.
constexpr int kTopExponent = 14;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
// Scratch of both paths starts with [consts: scale, 0, 1, - | partial maxima [kMaxPartials]].
size_t consts_bytes() { return align_up((4 + kMaxPartials) * sizeof(float)); }
unsigned blocks_for(size_t count, unsigned threads) { return static_cast<unsigned>((count + threads - 1) / threads); }

// Rows of W dequantized per chunk.
size_t chunk_rows(size_t n_in, size_t n_out) { return std::min(n_out, std::max<size_t>(1, kChunkHalves / n_in)); }

// Scratch: [consts: scale, 0, 1, - | partial maxima [kMaxPartials]] [x f16 [n, n_in]] [W f16 chunk].
struct Layout {
    size_t x_at;
    size_t w_at;
    size_t bytes;
};
Layout layout(size_t n, size_t n_in, size_t n_out) {
    Layout l{};
    l.x_at = consts_bytes();
    l.w_at = l.x_at + align_up(n * n_in * sizeof(__half));
    l.bytes = l.w_at + align_up(chunk_rows(n_in, n_out) * n_in * sizeof(__half));
    return l;
}

// partial[block] = max |x_i| over the block's grid-stride share (NaN ignored).
__global__ void abs_max_kernel(float* partial, const float* x, size_t count) {
    pdl_start();
    float m = 0.0f;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
        m = fmaxf(m, fabsf(x[i]));
    }
    m = block_reduce(m, true);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// The scale of to_f16_kernel (from the partial maxima), by thread 0 of the block into *s_scale and,
// in block 0, consts = {scale, 0, 1}.
__device__ void scale_of(float* s_scale, float* consts, const float* partial, unsigned n_partials) {
    if (threadIdx.x >= 32) return;
    float m = 0.0f;
    for (unsigned i = threadIdx.x; i < n_partials; i += 32) m = fmaxf(m, partial[i]);
    m = warp_max(m);
    if (threadIdx.x != 0) return;
    // The exponent stops at f32's smallest normal one, so 1 / scale stays finite for any x.
    const int e = max(ilogbf(m) - kTopExponent, -126);
    const float scale = m > 0.0f && isfinite(m) ? ldexpf(1.0f, e) : 1.0f;
    *s_scale = scale;
    if (blockIdx.x == 0) {
        consts[0] = scale;
        consts[1] = 0.0f;
        consts[2] = 1.0f;
    }
}

// 1 / scale (exact: a power of two) in every thread of the block; block 0 also writes consts.
__device__ float inverse_scale(float* consts, const float* partial, unsigned n_partials) {
    __shared__ float s_scale;
    scale_of(&s_scale, consts, partial, n_partials);
    __syncthreads();
    return 1.0f / s_scale;
}

// xh = x / scale in f16, scale = 2^(e - kTopExponent) (at least 2^-126) for the largest |x| in
// [2^e, 2^(e+1)) (1 when x is all zero or its largest value is not finite). Block 0 writes consts = {scale, 0, 1}.
__global__ void to_f16_kernel(__half2* xh, float* consts, const float* partial, unsigned n_partials, const float* x,
                              size_t pairs) {
    pdl_start();
    const float inv = inverse_scale(consts, partial, n_partials);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < pairs; i += size_t(gridDim.x) * blockDim.x) {
        xh[i] = __floats2half2_rn(x[2 * i] * inv, x[2 * i + 1] * inv);
    }
}

// hi + lo = x / scale: hi = f16(x / scale), lo = f16(x / scale - hi) (the difference is exact in
// f32). One element per thread and stride, so any count.
__global__ void split_f16_kernel(__half* hi, __half* lo, float* consts, const float* partial, unsigned n_partials,
                                 const float* x, size_t count) {
    pdl_start();
    const float inv = inverse_scale(consts, partial, n_partials);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
        const float v = x[i] * inv;
        const __half h = __float2half_rn(v);
        hi[i] = h;
        lo[i] = __float2half_rn(v - __half2float(h));
    }
}

// Rows [0, rows) of W (from w) into out [rows, n_in] f16: one thread per 32-element chunk.
template <DType T>
__global__ void dequant_f16_kernel(__half* out, const uint8_t* w, size_t row_bytes, size_t rows, size_t n_in) {
    pdl_start();
    const size_t chunks = n_in / 32;
    const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i >= rows * chunks) return;
    const size_t r = i / chunks, c = i % chunks;
    float v[32];
    deq32<T>(w + r * row_bytes, static_cast<int>(c), v);
    uint4* dst = reinterpret_cast<uint4*>(out + r * n_in + c * 32);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        __half2 h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[8 * q + 2 * j], v[8 * q + 2 * j + 1]);
        dst[q] = *reinterpret_cast<const uint4*>(h);
    }
}

// The partial maxima of |x| into consts + 4; returns how many.
unsigned max_pass(cudaStream_t s, float* consts, const float* x, size_t count) {
    const unsigned n_partials = std::max(1u, std::min(kMaxPartials, blocks_for(count, kThreads * 16)));
    run_kernel(s, abs_max_kernel, dim3(n_partials), dim3(kThreads), 0, consts + 4, x, count);
    return n_partials;
}

// xh [n, n_in] = x / scale in f16, consts = {scale, 0, 1}.
void round_x(cudaStream_t s, __half* xh, float* consts, const float* x, size_t count) {
    const float* partial = consts + 4;
    const unsigned n_partials = max_pass(s, consts, x, count);
    const size_t pairs = count / 2;
    const unsigned blocks = std::max(1u, std::min(4096u, blocks_for(pairs, kThreads * 4)));
    run_kernel(s, to_f16_kernel, dim3(blocks), dim3(kThreads), 0, reinterpret_cast<__half2*>(xh), consts, partial,
               n_partials, x, pairs);
}

// hi, lo [n, n_in]: x / scale = hi + lo in f16, consts = {scale, 0, 1}.
void split_x(cudaStream_t s, __half* hi, __half* lo, float* consts, const float* x, size_t count) {
    const unsigned n_partials = max_pass(s, consts, x, count);
    const unsigned blocks = std::max(1u, std::min(4096u, blocks_for(count, kThreads * 8)));
    run_kernel(s, split_f16_kernel, dim3(blocks), dim3(kThreads), 0, hi, lo, consts,
               static_cast<const float*>(consts + 4), n_partials, x, count);
}

}  // namespace

bool gemm_f16_supported(DType type) {
    return dispatch_quant(type, [](auto) {});
}

size_t gemm_f16_scratch_bytes(size_t n, size_t n_in, size_t n_out) { return layout(n, n_in, n_out).bytes; }

bool gemm_f16(cudaStream_t s, Blas& blas, float* y, const void* w, DType type, size_t row_bytes, const float* x,
              size_t n, size_t n_in, size_t n_out, bool accumulate, void* scratch) {
    if (!gemm_f16_supported(type) || n_in % 32 != 0 || n == 0 || n_out == 0) return false;
    const Layout l = layout(n, n_in, n_out);
    char* base = static_cast<char*>(scratch);
    float* consts = reinterpret_cast<float*>(base);
    __half* xh = reinterpret_cast<__half*>(base + l.x_at);
    __half* wh = reinterpret_cast<__half*>(base + l.w_at);
    round_x(s, xh, consts, x, n * n_in);
    const size_t rows = chunk_rows(n_in, n_out);
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    for (size_t r0 = 0; r0 < n_out; r0 += rows) {
        const size_t m = std::min(rows, n_out - r0);
        dispatch_quant(type, [&](auto tag) {
            constexpr DType T = decltype(tag)::value;
            run_kernel(s, dequant_f16_kernel<T>, dim3(blocks_for(m * (n_in / 32), kThreads)), dim3(kThreads), 0, wh,
                       wb + r0 * row_bytes, row_bytes, m, n_in);
        });
        blas.gemm_f16(s, y + r0, n_out, wh, n_in, xh, m, n, n_in, consts, consts + (accumulate ? 2 : 1));
    }
    return true;
}

size_t gemm_split_scratch_bytes(size_t n, size_t n_in) {
    return consts_bytes() + 2 * align_up(n * n_in * sizeof(__half));
}

void gemm_f16_weights(cudaStream_t s, Blas& blas, float* y, const void* w, size_t row_bytes, const float* x, size_t n,
                      size_t n_in, size_t n_out, bool accumulate, void* scratch) {
    if (n == 0 || n_out == 0) return;
    char* base = static_cast<char*>(scratch);
    float* consts = reinterpret_cast<float*>(base);
    __half* hi = reinterpret_cast<__half*>(base + consts_bytes());
    __half* lo = hi + align_up(n * n_in * sizeof(__half)) / sizeof(__half);
    split_x(s, hi, lo, consts, x, n * n_in);
    const size_t ldw = row_bytes / sizeof(__half);
    blas.gemm_f16(s, y, n_out, w, ldw, hi, n_out, n, n_in, consts, consts + (accumulate ? 2 : 1));
    blas.gemm_f16(s, y, n_out, w, ldw, lo, n_out, n, n_in, consts, consts + 2);  // y += W lo
}

}  // namespace cuda
}  // namespace cactus
