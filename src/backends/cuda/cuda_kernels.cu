// CUDA kernels of the row ops: embedding rows, matrix products over GGUF blocks, norms, RoPE and
// the element-wise ops. Launchers are declared in cuda_kernels.h.
#include <cuda_runtime.h>

#include <type_traits>

#include "backends/cuda/cuda_activation.cuh"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_launch.cuh"
#include "backends/cuda/cuda_reduce.cuh"
#include "backends/cuda/cuda_quant.cuh"
#include "core/error.h"

namespace cactus {
namespace cuda {

namespace {

constexpr int kWarps = 4;  // rows per matmul block (one warp a row)

unsigned blocks_for(size_t count, unsigned threads) {
    const size_t b = (count + threads - 1) / threads;
    return static_cast<unsigned>(b < 65535u * 16u ? (b > 0 ? b : 1) : 65535u * 16u);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v) { return block_reduce(v, false); }

template <DType T>
__host__ __device__ constexpr bool is_plain() {
    return T == DType::F32 || T == DType::F16 || T == DType::BF16;
}

// Calls f(std::integral_constant<DType, T>) for a supported weight type (the plain ones, then
// dispatch_quant's); false if unsupported.
template <class F>
bool dispatch(DType type, F&& f) {
    switch (type) {
        case DType::F32:
            f(std::integral_constant<DType, DType::F32>());
            return true;
        case DType::F16:
            f(std::integral_constant<DType, DType::F16>());
            return true;
        case DType::BF16:
            f(std::integral_constant<DType, DType::BF16>());
            return true;
        default:
            return dispatch_quant(type, f);
    }
}

void check_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail("cuda %s: kernel launch failed: %s", what, cudaGetErrorString(e));
}

// ---- embedding rows -------------------------------------------------------------------------------

template <DType T>
__global__ void get_rows_kernel(float* y, const uint8_t* table, size_t row_bytes, size_t table_rows, const int32_t* ids,
                                size_t width, float scale, uint32_t* status) {
    pdl_start();
    const size_t t = blockIdx.x;
    const int32_t id = ids[t];
    float* out = y + t * width;
    if (id < 0 || static_cast<size_t>(id) >= table_rows) {
        for (size_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = 0.0f;
        if (threadIdx.x == 0) atomicOr(status, kStatusBadRowId);
        return;
    }
    const uint8_t* row = table + static_cast<size_t>(id) * row_bytes;
    if constexpr (is_plain<T>()) {
        for (size_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = plain_at<T>(row, i) * scale;
    } else {
        for (size_t c = threadIdx.x; c < width / 32; c += blockDim.x) {
            float w[32];
            deq32<T>(row, static_cast<int>(c), w);
#pragma unroll
            for (int j = 0; j < 32; ++j) out[c * 32 + j] = w[j] * scale;
        }
    }
}

// ---- matrix products --------------------------------------------------------------------------------

// The activation rounding of the CPU's integer dot products (vec_dot_type): quantized weights meet
// activations quantized to Q8_0 / Q8_1 (32-element blocks: d = max|x| / 127 stored as f16,
// q = roundf(x / d)) or Q8_K (256-element blocks: iscale = -127 / (the signed largest |x|),
// q = min(127, rint(iscale x)), d = 1 / iscale). The kernels multiply the dequantized weights by
// x' = q * d in f32, which equals the CPU's per-block integer sums up to float rounding, so both
// backends compute the same function of the same rounded inputs.
template <DType T>
__host__ __device__ constexpr bool is_k_quant() {
    return T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;
}

template <DType T>
__host__ __device__ constexpr bool has_min() {
    return T == DType::Q4_1 || T == DType::Q5_1;
}

// xv: this lane's 32 activations (chunk c); for K-quants the 8 lanes of a 256-block cooperate
// (every lane of the warp must call this). Returns Q8_1's s = d * sum(q) rounded to f16 as the CPU
// stores it (the weights' minimum multiplies s, not the sum of the x').
template <DType T>
__device__ __forceinline__ float round_activations(float* xv, int lane) {
    if constexpr (is_k_quant<T>()) {
        float amax = 0.0f, mx = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const float a = fabsf(xv[j]);
            if (a > amax) {
                amax = a;
                mx = xv[j];
            }
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {  // the first element wins ties, as in the CPU's loop
            const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
            const float om = __shfl_xor_sync(0xffffffffu, mx, o);
            if (oa > amax || (oa == amax && (lane ^ o) < lane)) {
                amax = oa;
                mx = om;
            }
        }
        if (amax == 0.0f) {
#pragma unroll
            for (int j = 0; j < 32; ++j) xv[j] = 0.0f;
            return 0.0f;
        }
        const float iscale = -127.0f / mx;
        const float d = 1.0f / iscale;
#pragma unroll
        for (int j = 0; j < 32; ++j) xv[j] = fminf(127.0f, rintf(iscale * xv[j])) * d;
        return 0.0f;
    } else {
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(xv[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const float dh = __half2float(__float2half_rn(d));
        float qsum = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const float q = roundf(xv[j] * id);
            qsum += q;
            xv[j] = q * dh;
        }
        return __half2float(__float2half_rn(qsum * d));
    }
}

// The minimum m of the block of chunk c (Q4_1, Q5_1).
template <DType T>
__device__ __forceinline__ float block_min(const uint8_t* row, int c) {
    return h2f(row + c * (T == DType::Q4_1 ? 20 : 24) + 2);
}

// y [n, n_out] = x [n, n_in] W^T: one warp per weight row, NT tokens per block; quantized rows are
// read one 32-element chunk per lane and dequantized in registers. x rows are 16-byte aligned.
template <DType T, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_quant_kernel(float* y, const uint8_t* w, size_t row_bytes, const float* x, int n, int n_in, int n_out) {
    pdl_start();
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int r = blockIdx.x * kWarps + warp;
    if (r >= n_out) return;  // whole warps leave together
    const int t0 = blockIdx.y * NT;
    const int nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(r) * row_bytes;
    const int chunks = n_in / 32;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int base = 0; base < chunks; base += 32) {
        const int c = base + lane;
        const bool active = c < chunks;  // K-quants: whole 8-lane groups are active or not
        float wv[32];
        if (active) deq32<T>(wr, c, wv);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < nt) {
                float xv[32];
                if (active) {
                    const float4* xp = reinterpret_cast<const float4*>(x + static_cast<size_t>(t0 + t) * n_in + c * 32);
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        const float4 v = __ldg(xp + q);
                        xv[4 * q] = v.x;
                        xv[4 * q + 1] = v.y;
                        xv[4 * q + 2] = v.z;
                        xv[4 * q + 3] = v.w;
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < 32; ++j) xv[j] = 0.0f;
                }
                const float s16 = round_activations<T>(xv, lane);
                if (active) {
                    float s = 0.0f;
#pragma unroll
                    for (int j = 0; j < 32; ++j) s += wv[j] * xv[j];
                    if constexpr (has_min<T>()) {
                        // wv = d q + m: replace m * sum(x') by the CPU's m * s.
                        float xsum = 0.0f;
#pragma unroll
                        for (int j = 0; j < 32; ++j) xsum += xv[j];
                        s += block_min<T>(wr, c) * (s16 - xsum);
                    }
                    acc[t] += s;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[static_cast<size_t>(t0 + t) * n_out + r] = s;
    }
}

template <DType T, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_plain_kernel(float* y, const uint8_t* w, size_t row_bytes, const float* x, int n, int n_in, int n_out) {
    pdl_start();
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int r = blockIdx.x * kWarps + warp;
    if (r >= n_out) return;
    const int t0 = blockIdx.y * NT;
    const int nt = min(NT, n - t0);
    const uint8_t* wr = w + static_cast<size_t>(r) * row_bytes;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int i = lane; i < n_in; i += 32) {
        const float wv = plain_at<T>(wr, i);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t < nt) acc[t] += wv * __ldg(x + static_cast<size_t>(t0 + t) * n_in + i);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[static_cast<size_t>(t0 + t) * n_out + r] = s;
    }
}

template <DType T, int NT>
void launch_matmul(cudaStream_t s, float* y, const uint8_t* w, size_t row_bytes, const float* x, size_t n, size_t n_in,
                   size_t n_out) {
    const dim3 grid(static_cast<unsigned>((n_out + kWarps - 1) / kWarps), static_cast<unsigned>((n + NT - 1) / NT));
    if constexpr (is_plain<T>()) {
        run_kernel(s, matmul_plain_kernel<T, NT>, dim3(grid), dim3(kWarps * 32), 0, y, w, row_bytes, x,
                   static_cast<int>(n), static_cast<int>(n_in), static_cast<int>(n_out));
    } else {
        run_kernel(s, matmul_quant_kernel<T, NT>, dim3(grid), dim3(kWarps * 32), 0, y, w, row_bytes, x,
                   static_cast<int>(n), static_cast<int>(n_in), static_cast<int>(n_out));
    }
}

// ---- norms and element-wise ops ---------------------------------------------------------------------

__global__ void rms_norm_kernel(float* y, const float* x, const float* w, size_t width, float eps) {
    pdl_start();
    const float* in = x + blockIdx.x * width;
    float* out = y + blockIdx.x * width;
    float ss = 0.0f;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) ss += in[i] * in[i];
    ss = block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(width) + eps);
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = in[i] * inv * (w ? w[i] : 1.0f);
}

__global__ void layer_norm_kernel(float* y, const float* x, const float* w, const float* b, size_t width, float eps) {
    pdl_start();
    const float* in = x + blockIdx.x * width;
    float* out = y + blockIdx.x * width;
    float sum = 0.0f;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) sum += in[i];
    const float mean = block_sum(sum) / static_cast<float>(width);
    float var = 0.0f;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) var += (in[i] - mean) * (in[i] - mean);
    var = block_sum(var) / static_cast<float>(width);
    const float inv = 1.0f / sqrtf(var + eps);
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) {
        out[i] = (in[i] - mean) * inv * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

// One block per row of x; a row with a negative id is skipped (Backend::set_rows).
__global__ void set_rows_kernel(float* table, size_t table_rows, const float* x, const int32_t* ids, size_t width,
                                uint32_t* status) {
    pdl_start();
    const size_t r = blockIdx.x;
    const int32_t id = ids[r];
    if (id < 0) return;
    if (static_cast<size_t>(id) >= table_rows) {
        if (threadIdx.x == 0) atomicOr(status, kStatusBadSetRowId);
        return;
    }
    float* out = table + static_cast<size_t>(id) * width;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = x[r * width + i];
}

__global__ void add_kernel(float* y, const float* a, const float* b, size_t count, size_t width, bool broadcast) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        y[i] = a[i] + b[broadcast ? i % width : i];
    }
}

__global__ void scale_kernel(float* y, const float* x, float v, size_t count) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) y[i] = x[i] * v;
}

__global__ void softcap_kernel(float* y, const float* x, float cap, size_t count) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        y[i] = cap * tanhf(x[i] / cap);
    }
}

__global__ void gelu_kernel(float* y, const float* x, int kind, size_t count) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        y[i] = activate(x[i], kind);
    }
}

__global__ void glu_kernel(float* y, const float* gate, const float* up, int kind, size_t count) {
    pdl_start();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        y[i] = activate(gate[i], kind) * up[i];
    }
}

// One block per (token, head); angles in double as rope_cos_sin computes them.
__global__ void rope_kernel(float* x, const int32_t* pos, size_t n_head, size_t head_dim, size_t n_rot, bool neox,
                            float freq_base, float freq_scale, const float* factors) {
    pdl_start();
    const size_t t = blockIdx.x / n_head;
    const size_t h = blockIdx.x % n_head;
    float* head = x + (t * n_head + h) * head_dim;
    const size_t half = n_rot / 2;
    const float p = static_cast<float>(pos[t]) * freq_scale;
    for (size_t i = threadIdx.x; i < half; i += blockDim.x) {
        const double inv_freq = pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / n_rot);
        double theta = static_cast<double>(p) * inv_freq;
        if (factors) theta /= factors[i];
        const float c = static_cast<float>(cos(theta));
        const float sn = static_cast<float>(sin(theta));
        const size_t a = neox ? i : 2 * i;
        const size_t b = neox ? i + half : 2 * i + 1;
        const float x0 = head[a];
        const float x1 = head[b];
        head[a] = x0 * c - x1 * sn;
        head[b] = x0 * sn + x1 * c;
    }
}

// Spins for *ms milliseconds of GPU time (0: returns at once); ms is mapped host memory.
__global__ void spin_kernel(const volatile uint32_t* ms) {
    pdl_start();
    const uint64_t ns = static_cast<uint64_t>(*ms) * 1000000ull;
    uint64_t start = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        uint64_t now = 0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start >= ns) break;
    }
}

}  // namespace

bool weight_type_supported(DType type) {
    return dispatch(type, [](auto) {});
}

void get_rows(cudaStream_t s, float* y, const void* table, DType type, size_t row_bytes, size_t table_rows,
              const int32_t* ids, size_t n, size_t width, float scale, uint32_t* status) {
    if (n == 0) return;
    const bool ok = dispatch(type, [&](auto tag) {
        run_kernel(s, get_rows_kernel<decltype(tag)::value>, dim3(static_cast<unsigned>(n)), dim3(128), 0, y,
                   static_cast<const uint8_t*>(table), row_bytes, table_rows, ids, width, scale, status);
    });
    if (!ok) fail("cuda get_rows: type %s is not supported", dtype_name(type));
    check_launch("get_rows");
}

void set_rows(cudaStream_t s, float* table, size_t table_rows, const float* x, const int32_t* ids, size_t n,
              size_t width, uint32_t* status) {
    if (n == 0) return;
    const unsigned threads = width >= 128 ? 128u : 32u;
    run_kernel(s, set_rows_kernel, dim3(static_cast<unsigned>(n)), dim3(threads), 0, table, table_rows, x, ids, width,
               status);
    check_launch("set_rows");
}

void matmul(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n,
            size_t n_in, size_t n_out) {
    if (n == 0 || n_out == 0) return;
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    const bool ok = dispatch(type, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        if (n == 1) {
            launch_matmul<T, 1>(s, y, wb, row_bytes, x, n, n_in, n_out);
        } else {
            launch_matmul<T, 8>(s, y, wb, row_bytes, x, n, n_in, n_out);
        }
    });
    if (!ok) fail("cuda matmul: weight type %s is not supported", dtype_name(type));
    check_launch("matmul");
}

void rms_norm(cudaStream_t s, float* y, const float* x, const float* w, size_t n, size_t width, float eps) {
    if (n == 0) return;
    run_kernel(s, rms_norm_kernel, dim3(static_cast<unsigned>(n)), dim3(256), 0, y, x, w, width, eps);
    check_launch("rms_norm");
}

void layer_norm(cudaStream_t s, float* y, const float* x, const float* w, const float* b, size_t n, size_t width,
                float eps) {
    if (n == 0) return;
    run_kernel(s, layer_norm_kernel, dim3(static_cast<unsigned>(n)), dim3(256), 0, y, x, w, b, width, eps);
    check_launch("layer_norm");
}

void add(cudaStream_t s, float* y, const float* a, const float* b, size_t n, size_t width, size_t b_rows) {
    const size_t count = n * width;
    if (count == 0) return;
    run_kernel(s, add_kernel, dim3(blocks_for(count, 256)), dim3(256), 0, y, a, b, count, width, b_rows == 1 && n != 1);
    check_launch("add");
}

void scale(cudaStream_t s, float* y, const float* x, float v, size_t count) {
    if (count == 0) return;
    run_kernel(s, scale_kernel, dim3(blocks_for(count, 256)), dim3(256), 0, y, x, v, count);
    check_launch("scale");
}

void softcap(cudaStream_t s, float* y, const float* x, float cap, size_t count) {
    if (count == 0) return;
    run_kernel(s, softcap_kernel, dim3(blocks_for(count, 256)), dim3(256), 0, y, x, cap, count);
    check_launch("softcap");
}

void gelu(cudaStream_t s, float* y, const float* x, int kind, size_t count) {
    if (count == 0) return;
    run_kernel(s, gelu_kernel, dim3(blocks_for(count, 256)), dim3(256), 0, y, x, kind, count);
    check_launch("gelu");
}

void glu(cudaStream_t s, float* y, const float* gate, const float* up, int kind, size_t count) {
    if (count == 0) return;
    run_kernel(s, glu_kernel, dim3(blocks_for(count, 256)), dim3(256), 0, y, gate, up, kind, count);
    check_launch("glu");
}

void rope(cudaStream_t s, float* x, const int32_t* pos, size_t n, size_t n_head, size_t head_dim, size_t n_rot,
          bool neox, float freq_base, float freq_scale, const float* factors) {
    if (n == 0 || n_rot == 0) return;
    run_kernel(s, rope_kernel, dim3(static_cast<unsigned>(n * n_head)), dim3(64), 0, x, pos, n_head, head_dim, n_rot,
               neox, freq_base, freq_scale, factors);
    check_launch("rope");
}

void spin(cudaStream_t s, const uint32_t* ms) {
    run_kernel(s, spin_kernel, dim3(1), dim3(1), 0, ms);
    check_launch("spin");
}

}  // namespace cuda
}  // namespace cactus
