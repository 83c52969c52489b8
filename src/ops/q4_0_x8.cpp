#include "ops/q4_0_x8.h"

#include <cstring>

#include "core/error.h"
#include "ops/repack_groups.h"

namespace cactus {

namespace {

static_assert(kQ4_0X8GroupBytes == kQ4_0X8Rows * sizeof(BlockQ4_0), "Q4_0_X8 keeps the blocks' bytes");

// Where row r's 16 bytes of nibbles sit in a group's block.
size_t quants_offset(size_t row) { return 32 * (row % 4) + 16 * (row / 4); }

}  // namespace

void repack_q4_0_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n) {
    repack_groups<BlockQ4_0, kQK32>("repack_q4_0_x8", dst, src, src_row_bytes, n_rows, n, kQ4_0X8GroupBytes,
                                    [](uint8_t* group, size_t r, const BlockQ4_0& b) {
                                        std::memcpy(group + quants_offset(r), b.qs, sizeof(b.qs));
                                        std::memcpy(group + kQ4_0X8DOffset + 2 * r, &b.d, 2);
                                    });
}

void q4_0_x8_row_blocks(BlockQ4_0* dst, const uint8_t* group, size_t row, size_t n) {
    CACTUS_ASSERT(row < kQ4_0X8Rows && n % kQK32 == 0);
    for (size_t b = 0; b < n / kQK32; ++b, group += kQ4_0X8GroupBytes) {
        std::memcpy(dst[b].qs, group + quants_offset(row), sizeof(dst[b].qs));
        std::memcpy(&dst[b].d, group + kQ4_0X8DOffset + 2 * row, 2);
    }
}

}  // namespace cactus
