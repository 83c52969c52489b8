#pragma once
// The CPU kernel table: one entry per op and type, filled once at start-up from the CPU's features
// (generic scalar, AVX2, AVX-512 VNNI, NEON dotprod). Callers never test for an ISA themselves.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace cactus {

class ThreadPool;

using VecDotFn = float (*)(const void* w, const void* x, size_t n);
using QuantizeRowFn = void (*)(void* dst, const float* src, size_t n);
using DequantizeRowFn = void (*)(float* dst, const void* src, size_t n);

// Rows of weights that one GEMM tile reads at once, and the most tokens it takes per call.
constexpr size_t kGemmTileRows = 4;
constexpr size_t kGemmTileTokens = 8;
// A register tile of the matrix product: for r < kGemmTileRows, t < n_tokens (1..kGemmTileTokens)
//   y[t * y_stride + r] = vec_dot(w + r * w_row_bytes, x + t * x_row_bytes, n)
// with the same result, bit for bit, as the table's vec_dot (each loaded weight block is reused
// across the tokens and each activation block across the rows).
using GemmTileFn = void (*)(float* y, size_t y_stride, const void* w, size_t w_row_bytes,
                            const void* x, size_t x_row_bytes, size_t n, size_t n_tokens);

struct CpuKernels {
    const char* isa_name = "generic";
    VecDotFn vec_dot[32] = {};             // indexed by weight DType
    QuantizeRowFn quantize_row[32] = {};   // indexed by activation DType
    DequantizeRowFn dequantize_row[32] = {};
    GemmTileFn gemm_tile[32] = {};         // indexed by weight DType; null: matmul uses vec_dot
};

// The table for this machine (chosen once, thread-safe).
const CpuKernels& cpu_kernels();
// The table restricted to the scalar references (tests compare against it).
const CpuKernels& cpu_kernels_generic();

// Every table this machine can run, the generic one first, then by increasing ISA (tests compare
// each against the generic table; benchmarks time them side by side).
std::vector<const CpuKernels*> cpu_kernel_tables();

// y[t, o] = sum_i W[o, i] * x[t, i] for t < n_tokens, o < n_out.
// W: [n_out, n_in] rows in `w_type`, row stride `w_row_bytes`; x: [n_tokens, n_in] f32;
// y: [n_tokens, n_out] f32. Work is split over the pool's threads.
void matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x,
            size_t n_tokens, size_t n_in, size_t n_out, ThreadPool& pool);
// The same with an explicit kernel table (tests and benchmarks).
void matmul_with(const CpuKernels& kernels, float* y, const void* w, DType w_type,
                 size_t w_row_bytes, const float* x, size_t n_tokens, size_t n_in, size_t n_out,
                 ThreadPool& pool);

}  // namespace cactus
