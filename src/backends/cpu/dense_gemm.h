#pragma once
// Dense f32 matrix products for encoders (attention scores and weighted values over hundreds of
// keys: Whisper's 1500 frames, vision patches), where no decode step ever needs the same numbers:
//   C[i, j] = sum_k A[i, k] * B[j, k]        i < m, j < n
// Each C element is one chain of fused multiply-adds in k order, starting from 0, on every tier,
// so every tier gives the same bits (tests/ops/dense_gemm_test.cpp). This is not the order of the
// weight matmuls (cactus::matmul), whose tiles equal the one-token vec_dot.
//
// B is packed into panels of 16 columns ([k][16] each, zero-padded past n): once per call for many
// rows, or, for up to 1024 rows and n >= m, one k block of a chunk of panels at a time, just before
// the chunk's rows use it (B read once, the packed block in L2). The tier's micro-kernel multiplies
// up to 6 rows of A by one panel in registers (AVX2: 12 ymm accumulators, one broadcast of A per row
// and k, two panel loads per k). Long k is cut into
// blocks of kDenseKBlock that stay in L1 (a block's chains resume from C: same order, same bits).
//
// B may be IEEE half (the encoders' F16 weights as B rows: y = x W^T for hundreds of tokens); it is
// widened to f32 while packing, exactly.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace cactus {

class ThreadPool;

constexpr size_t kDensePanel = 16;    // columns of C per packed panel
constexpr size_t kDenseMaxRows = 6;   // rows of A per micro-kernel call
constexpr size_t kDenseKBlock = 256;  // k per pass: 6 rows of A (6 KiB) + a panel slice (16 KiB) in L1

struct DenseGemmKernels {
    const char* isa_name;
    // c[r * ldc + j] = sum_{kk < k} a[r * lda + kk] * panel[kk * 16 + j], for r < rows (1..6), j < 16:
    // fused multiply-adds in kk order, starting from 0 or, with `accumulate`, from c's value.
    void (*panel_rows)(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows,
                       bool accumulate);
    // Few queries (a decode step's cross-attention over the encoder states), straight from the rows,
    // no packing; summation order is the tier's own (not bit-exact across tiers):
    //   dot_rows:  s[j] = sum_{c < d} q[c] * rows[j * stride + c]         for j < n_rows
    //   axpy_rows: out[c] += sum_{j < n_rows} p[j] * rows[j * stride + c]  for c < d
    void (*dot_rows)(float* s, const float* q, const float* rows, size_t stride, size_t n_rows, size_t d);
    void (*axpy_rows)(float* out, const float* p, const float* rows, size_t stride, size_t n_rows, size_t d);
    // Optional (nullptr: two panel_rows calls): panel_rows over two whole panels at once, columns
    // 0-15 from panel0 and 16-31 from panel1 (c's row holds 32). Twice the independent FMA chains
    // of one panel hide the FMA latency where one register covers a panel row (AVX-512).
    void (*panel_rows2)(float* c, size_t ldc, const float* a, size_t lda, const float* panel0, const float* panel1,
                        size_t k, size_t rows, bool accumulate) = nullptr;
};

// The generic dot_rows / axpy_rows (also in tables without their own).
void dense_dot_rows_generic(float* s, const float* q, const float* rows, size_t stride, size_t n_rows, size_t d);
void dense_axpy_rows_generic(float* out, const float* p, const float* rows, size_t stride, size_t n_rows, size_t d);

const DenseGemmKernels& dense_gemm_kernels_generic();
const DenseGemmKernels& dense_gemm_kernels_avx2();    // x86-64 only (avx2/dense_gemm_avx2.cpp)
const DenseGemmKernels& dense_gemm_kernels_avx512();  // x86-64 only (avx512/dense_gemm_avx512.cpp)
const DenseGemmKernels& dense_gemm_kernels_neon();    // aarch64 only (neon/dense_gemm_neon.cpp)
const DenseGemmKernels& dense_gemm_kernels();         // the chosen tier (cpu_dispatch.cpp)
// Every table this CPU can run, generic first (tests; cpu_dispatch.cpp).
std::vector<const DenseGemmKernels*> dense_gemm_tables();

// B element (j, k) is at b[j * stride + k] (rows of B are the columns of C: keys for scores, weight
// rows for linears) or, k_major, at b[k * stride + j] (values for weighted sums: C = P V). With
// `half` set, B is IEEE half at half[...] (same indexing) and b is unused.
struct DenseB {
    const float* b;
    size_t stride;
    bool k_major;
    const uint16_t* half = nullptr;
};

// C [m, n] (row stride ldc) = A [m, k] (row stride lda) times B^T; `packed` is scratch space
// reused between calls. Work is split over the pool by blocks of rows of A.
void dense_gemm(float* c, size_t ldc, const float* a, size_t lda, const DenseB& b, size_t m, size_t n, size_t k,
                std::vector<float>& packed, ThreadPool& pool, const DenseGemmKernels& kernels = dense_gemm_kernels());

// The two halves of dense_gemm, for callers that pack B once and multiply row blocks of their
// own on the pool's threads (the encoders' fused attention): dense_pack_panel packs panel p of B
// into packed [n_panels][k][16] (sized n_panels * max(k, 1) * 16 by the caller); dense_gemm_rows
// computes C [m, n] from A [m, k] and that packed B on the calling thread, in the same order.
void dense_pack_panel(float* packed, const DenseB& b, size_t n, size_t k, size_t p);
void dense_gemm_rows(float* c, size_t ldc, const float* a, size_t lda, const float* packed, size_t m, size_t n,
                     size_t k, const DenseGemmKernels& kernels = dense_gemm_kernels());

// y [n_tokens, n_out] = x [n_tokens, n_in] W^T through dense_gemm, W [n_out] rows of F16 or F32
// (w_row_bytes apart): the encoders' linears and convolutions. Returns false, doing nothing, for
// other weight types.
bool dense_matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x, size_t n_tokens,
                  size_t n_in, size_t n_out, std::vector<float>& packed, ThreadPool& pool);

}  // namespace cactus
