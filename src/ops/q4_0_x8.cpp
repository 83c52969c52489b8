#include "ops/q4_0_x8.h"

#include <cstring>

#include "core/error.h"

namespace cactus {

namespace {

static_assert(kQ4_0X8GroupBytes == kQ4_0X8Rows * sizeof(BlockQ4_0), "Q4_0_X8 keeps the blocks' bytes");

// Where row r's 16 bytes of nibbles sit in a group's block.
size_t quants_offset(size_t row) { return 32 * (row % 4) + 16 * (row / 4); }

}  // namespace

void repack_q4_0_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n) {
    if (n_rows % kQ4_0X8Rows != 0 || n % kQK32 != 0) {
        fail("repack_q4_0_x8: %zu rows of %zu is not whole groups of 8 rows of blocks", n_rows, n);
    }
    const size_t n_blocks = n / kQK32;
    for (size_t g = 0; g < n_rows / kQ4_0X8Rows; ++g) {
        for (size_t b = 0; b < n_blocks; ++b, dst += kQ4_0X8GroupBytes) {
            for (size_t r = 0; r < kQ4_0X8Rows; ++r) {
                const BlockQ4_0& block =
                    reinterpret_cast<const BlockQ4_0*>(src + (kQ4_0X8Rows * g + r) * src_row_bytes)[b];
                std::memcpy(dst + quants_offset(r), block.qs, sizeof(block.qs));
                std::memcpy(dst + kQ4_0X8DOffset + 2 * r, &block.d, 2);
            }
        }
    }
}

void q4_0_x8_row_blocks(BlockQ4_0* dst, const uint8_t* group, size_t row, size_t n) {
    CACTUS_ASSERT(row < kQ4_0X8Rows && n % kQK32 == 0);
    for (size_t b = 0; b < n / kQK32; ++b, group += kQ4_0X8GroupBytes) {
        std::memcpy(dst[b].qs, group + quants_offset(row), sizeof(dst[b].qs));
        std::memcpy(&dst[b].d, group + kQ4_0X8DOffset + 2 * row, 2);
    }
}

}  // namespace cactus
