#pragma once
// The walk shared by the load-time layouts of 8-row groups (ops/q4_0_x8.h, q4_k_x8.h, q6_k_x8.h):
// group by group, block by block, the 8 rows' blocks of the file placed into one group block.
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace cactus {

// dst: n_rows / 8 groups of n / kBlockElems blocks of group_bytes  <-  n_rows rows of Block
// (row stride src_row_bytes); place(group_block, row, block) writes row `row`'s block. Fails naming
// `what` unless n_rows % 8 == 0 and n % kBlockElems == 0.
template <class Block, size_t kBlockElems, class Place>
void repack_groups(const char* what, uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n,
                   size_t group_bytes, const Place& place) {
    constexpr size_t kRows = 8;
    if (n_rows % kRows != 0 || n % kBlockElems != 0) {
        fail("%s: %zu rows of %zu is not whole groups of 8 rows of blocks of %zu", what, n_rows, n, kBlockElems);
    }
    const size_t n_blocks = n / kBlockElems;
    for (size_t g = 0; g < n_rows / kRows; ++g) {
        for (size_t b = 0; b < n_blocks; ++b, dst += group_bytes) {
            for (size_t r = 0; r < kRows; ++r) {
                place(dst, r, reinterpret_cast<const Block*>(src + (kRows * g + r) * src_row_bytes)[b]);
            }
        }
    }
}

}  // namespace cactus
