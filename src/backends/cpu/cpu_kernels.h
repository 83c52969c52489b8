#pragma once
// The CPU kernel table: one entry per op and type, filled once at start-up from the CPU's features
// (generic scalar, AVX2, AVX-512 VNNI, AVX-512 with AMX tiles, NEON dotprod). Callers never test for
// an ISA themselves.
#include <cstddef>
#include <cstdint>
#include <string>
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
using GemmTileFn = void (*)(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                            size_t x_row_bytes, size_t n, size_t n_tokens);

// Row panels of the 32-element formats (AVX-512 VNNI table): kPanelRows weight rows unpacked to one
// unsigned byte per quant (u = q + offset) and interleaved so that 32-bit lane r of a 512-bit vector
// holds 4 quants of row r. One vpdpbusd then advances 16 rows of one token, and the float work of a
// block (convert, scale, accumulate) is one instruction per 16 (row, token) pairs instead of 16.
// Panels are built per call in a thread-local scratch from the original GGUF rows (no extra memory).
// Panel block b, kPanelBlockBytes bytes:
//   u8  quants[8][kPanelRows][4]  group g: quants 4g..4g+3 of each row
//   f32 d[kPanelRows]             row scales
//   f32 m[kPanelRows]             row minimums (Q4_1; zero otherwise)
// K-quant panels (AVX2 and AVX-512 tables) use the same scratch, 8 panel blocks per super-block of
// 256, in their own layout (avx2/x86_k_panel_layout.h); their PanelActBlocks are per chunk of 32.
constexpr size_t kPanelRows = 16;
constexpr size_t kPanelGroupBytes = kPanelRows * 4;         // one group of 4 quants of every row
constexpr size_t kPanelScaleOffset = 8 * kPanelGroupBytes;  // f32 d[kPanelRows]
constexpr size_t kPanelMinOffset = kPanelScaleOffset + kPanelRows * sizeof(float);
constexpr size_t kPanelBlockBytes = kPanelMinOffset + kPanelRows * sizeof(float);
// Per (token, block) facts the panel product needs from a quantized activation row.
struct PanelActBlock {
    float d;        // activation scale
    int32_t bias;   // -offset * sum(q): turns the unsigned weight dot into the signed one
    float s;        // d * sum(q) as stored by Q8_1 (formats with a minimum), else 0
    int32_t bias2;  // K-quant panels: a second integer fact of the chunk (avx2_k_panels.inl), else 0
};
// panel: [n / 32] panel blocks  <-  w: kPanelRows rows of n elements, row stride w_row_bytes
using PackPanelFn = void (*)(uint8_t* panel, const void* w, size_t w_row_bytes, size_t n);
// act: [n / 32]  <-  x: one quantized activation row of n elements
using PanelActFn = void (*)(PanelActBlock* act, const void* x, size_t n);
// y[t * y_stride + r] = vec_dot(row r, token t) bit for bit, r < kPanelRows, t < n_tokens (any).
// x: token rows of x_row_bytes; act: token rows of act_row_blocks PanelActBlocks.
using PanelGemmFn = void (*)(float* y, size_t y_stride, const uint8_t* panel, const void* x, size_t x_row_bytes,
                             const PanelActBlock* act, size_t act_row_blocks, size_t n, size_t n_tokens);

// One token (decode) over kPanelRows rows read straight from the GGUF rows (no unpacked panel):
//   y[r] = vec_dot(w + r * w_row_bytes, x, n) bit for bit, r < kPanelRows
// act: [n / 32] from the table's decode_act of the same type (null where that is null). Reads nothing
// past row 15's n elements.
using PanelDecodeFn = void (*)(float* y /* [kPanelRows] */, const void* w, size_t w_row_bytes, const void* x,
                               const PanelActBlock* act, size_t n);

// Several tokens (verification steps of speculative decoding, decode steps of several sequences)
// over kPanelRows rows read straight from the weight rows, each block of weights unpacked once for
// all the tokens rather than once per token:
//   y[t * y_stride + r] = vec_dot(row r, token t) bit for bit, r < kPanelRows, t < n_tokens (any)
// x: token rows of x_row_bytes in vec_dot_type. Reads nothing past row 15's n elements.
using PanelDecodeTokensFn = void (*)(float* y, size_t y_stride, const void* w, size_t w_row_bytes, const void* x,
                                     size_t x_row_bytes, size_t n_tokens, size_t n);

// Load-time repacking of a weight that is only multiplied by (CpuBackend::pack_for_products):
// dst <- n_rows rows of n elements from src (row stride src_row_bytes), n_rows a multiple of
// kPanelRows, in the table's own layout (repack_type) whose panels and panel_decode it has.
using RepackFn = void (*)(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n);

struct CpuKernels {
    const char* isa_name = "generic";
    VecDotFn vec_dot[kDTypeSlots] = {};            // indexed by weight DType
    QuantizeRowFn quantize_row[kDTypeSlots] = {};  // indexed by activation DType
    DequantizeRowFn dequantize_row[kDTypeSlots] = {};
    GemmTileFn gemm_tile[kDTypeSlots] = {};  // indexed by weight DType; null: matmul uses vec_dot
    // Float weight types whose gemm_tile equals, bit for bit, the F32 gemm_tile on the rows widened
    // by dequantize_row: matmul then widens each tile of rows once per block of tokens.
    bool tile_on_f32_rows[kDTypeSlots] = {};
    // Row panels, indexed by weight DType; all three or none. Used for 2+ tokens before gemm_tile.
    PackPanelFn pack_panel[kDTypeSlots] = {};
    PanelActFn panel_act[kDTypeSlots] = {};
    PanelGemmFn panel_gemm[kDTypeSlots] = {};
    // One-token products of kPanelRows rows, indexed by weight DType, and the activation facts they
    // read (null: none, the K-quants; the AVX-512 table keeps the AVX2 table's pair for the
    // 32-element formats, faster there for one token: bench/compare_llama.py).
    PanelDecodeFn panel_decode[kDTypeSlots] = {};
    PanelActFn decode_act[kDTypeSlots] = {};
    // The same for several tokens at once, for the types whose per-token unpacking dominates a step
    // (null: panel_decode token by token).
    PanelDecodeTokensFn panel_decode_tokens[kDTypeSlots] = {};
    // Indexed by the file's weight DType (x86: Q4_0 -> Q4_0_X8; AVX2 also Q4_K -> Q4_K_X8, Q6_K -> Q6_K_X8); null: kept.
    RepackFn repack[kDTypeSlots] = {};
    DType repack_type[kDTypeSlots] = {};
};

// The table for this machine (chosen once, thread-safe).
const CpuKernels& cpu_kernels();

// The table slot of `type`: its id. Fails naming `caller` for an id that is not a known type, so
// an unknown id never aliases another type's kernel (as `id & 31` would).
size_t kernel_slot(DType type, const char* caller);

// dst [n] = one row of `type` (n elements) as f32, with the machine's kernel (the scalar reference
// when the table has none). Unknown type ids are errors.
void dequantize_row_cpu(DType type, float* dst, const void* src, size_t n);
// The table restricted to the scalar references (tests compare against it).
const CpuKernels& cpu_kernels_generic();

// Every table this machine can run, the generic one first, then by increasing ISA (tests compare
// each against the generic table; benchmarks time them side by side).
std::vector<const CpuKernels*> cpu_kernel_tables();
// The isa_name of every table this build has for its architecture, whether or not this machine
// can run it (docs/OPS.md lists the tiers from a machine that runs them all).
std::vector<std::string> cpu_kernel_tier_names();

// y[t, o] = sum_i W[o, i] * x[t, i] for t < n_tokens, o < n_out.
// W: [n_out, n_in] rows in `w_type`, row stride `w_row_bytes`; x: [n_tokens, n_in] f32;
// y: [n_tokens, n_out] f32. Work is split over the pool's threads.
void matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x, size_t n_tokens, size_t n_in,
            size_t n_out, ThreadPool& pool);
// The same with an explicit kernel table (tests and benchmarks).
void matmul_with(const CpuKernels& kernels, float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x,
                 size_t n_tokens, size_t n_in, size_t n_out, ThreadPool& pool);

// One product of a group that reads the same activations: y [n_tokens, n_out] = x W^T with
// W: [n_out, n_in] rows in w_type, row stride w_row_bytes.
struct MatmulProduct {
    float* y;
    const void* w;
    DType w_type;
    size_t w_row_bytes;
    size_t n_out;
};
constexpr size_t kMaxSharedProducts = 4;
// Every product of the group (at most kMaxSharedProducts) with the same x [n_tokens, n_in], as one
// job of the pool: x is quantized once per activation type, and the threads wait once, not once per
// product (a decode step runs hundreds of products of ~10-100 us). Each y equals matmul's bit for bit.
void matmuls(const MatmulProduct* products, size_t n_products, const float* x, size_t n_tokens, size_t n_in,
             ThreadPool& pool);
void matmuls_with(const CpuKernels& kernels, const MatmulProduct* products, size_t n_products, const float* x,
                  size_t n_tokens, size_t n_in, ThreadPool& pool);

}  // namespace cactus
