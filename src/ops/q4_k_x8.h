#pragma once
// Q4_K_X8: Q4_K weights repacked at load for the x86 tables' one-token product (CpuBackend::
// pack_for_products). Groups of 8 rows; per group and super-block of 256, kQ4KX8GroupBytes bytes
// (8 GGUF blocks are 1152: +2.8%), pairs p = rows (p, p + 4) of the group, p < 4:
//   [256 p, 256 p + 256)         quants: part (j, h) (j < 4, h < 2) at 32 (2 j + h) holds the 16 bytes
//                                qs[32 j + 16 h, +16) of row p, then the same 16 bytes of row p + 4
//   [1024 + 32 p, +32)           scale_0..7 and min_0..7 of row p as bytes (unpacked from 6 bits),
//                                then those of row p + 4
//   [1152, 1168) / [1168, 1184)  d / dmin of rows 0..7 (f16)
// One 256-bit load then gives a pair's 16-byte halves without a lane insert, the scales need no
// 6-bit unpack and the 8 rows' d and dmin are one load each (tests/tools/matmul_bench).
// Rows are interleaved, so the matrix is only addressable by group: a row count that is a multiple
// of 8, row stride dtype_row_bytes(Q4_K_X8, n) = 148 bytes per super-block, group g at
// 8 g * row stride.
#include <cstddef>
#include <cstdint>

#include "ops/quant_blocks.h"

namespace cactus {

constexpr size_t kQ4KX8Rows = 8;
constexpr size_t kQ4KX8GroupBytes = 1184;
constexpr size_t kQ4KX8ScaleOffset = 1024;
constexpr size_t kQ4KX8DOffset = 1152;
constexpr size_t kQ4KX8DminOffset = 1168;

// Where row `row` (< 8) of a group has its 16-byte quant part (j, h) and its 16 scale bytes (scales,
// then mins) in a super-block of the group.
inline size_t q4_k_x8_part_offset(size_t row, int j, int h) {
    return 256 * (row % 4) + 32 * static_cast<size_t>(2 * j + h) + 16 * (row / 4);
}
inline size_t q4_k_x8_scale_offset(size_t row) { return kQ4KX8ScaleOffset + 32 * (row % 4) + 16 * (row / 4); }

// dst: n_rows / 8 groups  <-  src: n_rows Q4_K rows of n elements (row stride src_row_bytes).
// n_rows % 8 == 0 and n % 256 == 0 (checked).
void repack_q4_k_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n);

// The n / 256 GGUF blocks of row `row` (< 8) of the group at `group`, byte for byte as they were.
void q4_k_x8_row_blocks(BlockQ4_K* dst, const uint8_t* group, size_t row, size_t n);

}  // namespace cactus
