#pragma once
// Q6_K_X8: Q6_K weights repacked at load for the x86 tables' one-token product (CpuBackend::
// pack_for_products). Groups of 8 rows; per group and super-block of 256, kQ6KX8GroupBytes bytes,
// as many as the 8 GGUF blocks:
//   [208 r, 208 r + 208)   row r (BlockQ6_KX8Row without d): its quants in a 6 + 2 bit layout, then
//                          its 16 scales as in the GGUF block
//   [1664, 1680)           d of rows 0..7 (f16)
// Quants: chunk c = 4 g + k (g < 2, k < 4) is quants 32 c .. 32 c + 31. For k < 3, byte l of
// q[32 (3 g + k), +32) is quant 32 c + l (bits 0..5) with bits 2 k, 2 k + 1 of quant
// 32 (4 g + 3) + l in its bits 6, 7. So three of four chunks are one mask away, and the fourth
// gathers its three bit pairs: the decode does 11 vector operations per four chunks where the
// GGUF's 4 + 2 bit split takes 17, and reads one sequential stream instead of 8 rows 210 bytes
// apart; the 8 rows' d are one load (tests/tools/matmul_bench). Rows are interleaved, so
// the matrix is only addressable by group: a row count that is a multiple of 8, row stride
// dtype_row_bytes(Q6_K_X8, n) = 210 bytes per super-block, group g at 8 g * row stride.
#include <cstddef>
#include <cstdint>

#include "ops/quant_blocks.h"

namespace cactus {

// One row's super-block in this layout, with its d: the first 208 bytes are what a group holds.
struct BlockQ6_KX8Row {
    uint8_t q[3 * kQKK / 4];   // 6 + 2 bit quants, see above
    int8_t scales[kQKK / 16];  // as BlockQ6_K's
    uint16_t d;
};

constexpr size_t kQ6KX8Rows = 8;
constexpr size_t kQ6KX8RowBytes = 208;  // BlockQ6_KX8Row without d
constexpr size_t kQ6KX8DOffset = kQ6KX8Rows * kQ6KX8RowBytes;
constexpr size_t kQ6KX8GroupBytes = kQ6KX8DOffset + 2 * kQ6KX8Rows;

// dst: n_rows / 8 groups  <-  src: n_rows Q6_K rows of n elements (row stride src_row_bytes).
// n_rows % 8 == 0 and n % 256 == 0 (checked).
void repack_q6_k_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n);

// The n / 256 GGUF blocks of row `row` (< 8) of the group at `group`, byte for byte as they were.
void q6_k_x8_row_blocks(BlockQ6_K* dst, const uint8_t* group, size_t row, size_t n);

}  // namespace cactus
