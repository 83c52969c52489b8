#pragma once
// Q4_0_X8: Q4_0 weights repacked at load for the x86 tables' one-token product (CpuBackend::
// pack_for_products). Groups of 8 rows; per group and block of 32, kQ4_0X8GroupBytes bytes, as
// many as the 8 GGUF blocks:
//   [32 p, 32 p + 32)   pair p = rows (p, p + 4), p < 4: row p's 16 bytes of nibbles, then row p + 4's
//   [128, 144)          d of rows 0..7 (f16)
// One 256-bit load then gives a pair's quants without a lane insert, the 8 rows' d are one load
// instead of a gather, and the decode reads one sequential stream (tests/tools/matmul_bench).
// Rows are interleaved, so the matrix is only addressable by group: a row count that is a multiple
// of 8, row stride dtype_row_bytes(Q4_0_X8, n) = 18 bytes per block, group g at 8 g * row stride.
#include <cstddef>
#include <cstdint>

#include "ops/quant_blocks.h"

namespace cactus {

constexpr size_t kQ4_0X8Rows = 8;
constexpr size_t kQ4_0X8DOffset = 128;
constexpr size_t kQ4_0X8GroupBytes = kQ4_0X8DOffset + 2 * kQ4_0X8Rows;

// dst: n_rows / 8 groups  <-  src: n_rows Q4_0 rows of n elements (row stride src_row_bytes).
// n_rows % 8 == 0 and n % 32 == 0 (checked).
void repack_q4_0_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n);

// The n / 32 GGUF blocks of row `row` (< 8) of the group at `group`, byte for byte as they were.
void q4_0_x8_row_blocks(BlockQ4_0* dst, const uint8_t* group, size_t row, size_t n);

}  // namespace cactus
