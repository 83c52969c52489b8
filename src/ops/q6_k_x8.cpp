#include "ops/q6_k_x8.h"

#include <cstddef>
#include <cstring>

#include "core/error.h"
#include "ops/repack_groups.h"

namespace cactus {

namespace {

static_assert(sizeof(BlockQ6_KX8Row) == sizeof(BlockQ6_K) && offsetof(BlockQ6_KX8Row, d) == kQ6KX8RowBytes,
              "a Q6_K_X8 row's super-block is as long as a Q6_K block, d last");
static_assert(kQ6KX8GroupBytes == kQ6KX8Rows * sizeof(BlockQ6_K), "Q6_K_X8 keeps the blocks' size");

// Chunk c = 4 g + k of a GGUF block: low 4 bits from ql[64 g + 32 (k & 1) + l] (its high nibble
// when k >= 2), bits 4, 5 from bits 2 k, 2 k + 1 of qh[32 g + l].
uint8_t gguf_quant(const BlockQ6_K& b, int c, int l) {
    const int g = c / 4, k = c % 4;
    const uint8_t low = b.ql[64 * g + 32 * (k & 1) + l];
    const uint8_t high = b.qh[32 * g + l];
    return static_cast<uint8_t>(((k >= 2 ? low >> 4 : low) & 0x0F) | (((high >> (2 * k)) & 3) << 4));
}

void set_gguf_quant(BlockQ6_K& b, int c, int l, uint8_t q) {
    const int g = c / 4, k = c % 4;
    uint8_t& low = b.ql[64 * g + 32 * (k & 1) + l];
    low = static_cast<uint8_t>(k >= 2 ? (low & 0x0F) | ((q & 0x0F) << 4) : (low & 0xF0) | (q & 0x0F));
    uint8_t& high = b.qh[32 * g + l];
    high = static_cast<uint8_t>((high & ~(3 << (2 * k))) | ((q >> 4) << (2 * k)));
}

void to_x8_row(const BlockQ6_K& b, BlockQ6_KX8Row& row) {
    for (int g = 0; g < 2; ++g) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t fourth = gguf_quant(b, 4 * g + 3, l);
            for (int k = 0; k < 3; ++k) {
                row.q[32 * (3 * g + k) + l] =
                    static_cast<uint8_t>(gguf_quant(b, 4 * g + k, l) | (((fourth >> (2 * k)) & 3) << 6));
            }
        }
    }
    std::memcpy(row.scales, b.scales, sizeof(row.scales));
    row.d = b.d;
}

void to_gguf_block(const BlockQ6_KX8Row& row, BlockQ6_K& b) {
    for (int g = 0; g < 2; ++g) {
        for (int l = 0; l < 32; ++l) {
            uint8_t fourth = 0;
            for (int k = 0; k < 3; ++k) {
                const uint8_t byte = row.q[32 * (3 * g + k) + l];
                set_gguf_quant(b, 4 * g + k, l, byte & 0x3F);
                fourth = static_cast<uint8_t>(fourth | ((byte >> 6) << (2 * k)));
            }
            set_gguf_quant(b, 4 * g + 3, l, fourth);
        }
    }
    std::memcpy(b.scales, row.scales, sizeof(b.scales));
    b.d = row.d;
}

}  // namespace

void repack_q6_k_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n) {
    repack_groups<BlockQ6_K, kQKK>("repack_q6_k_x8", dst, src, src_row_bytes, n_rows, n, kQ6KX8GroupBytes,
                                   [](uint8_t* group, size_t r, const BlockQ6_K& b) {
                                       BlockQ6_KX8Row row;
                                       to_x8_row(b, row);
                                       std::memcpy(group + kQ6KX8RowBytes * r, &row, kQ6KX8RowBytes);
                                       std::memcpy(group + kQ6KX8DOffset + 2 * r, &row.d, 2);
                                   });
}

void q6_k_x8_row_blocks(BlockQ6_K* dst, const uint8_t* group, size_t row, size_t n) {
    CACTUS_ASSERT(row < kQ6KX8Rows && n % kQKK == 0);
    BlockQ6_KX8Row x8;
    for (size_t sb = 0; sb < n / kQKK; ++sb, group += kQ6KX8GroupBytes) {
        std::memcpy(&x8, group + kQ6KX8RowBytes * row, kQ6KX8RowBytes);
        std::memcpy(&x8.d, group + kQ6KX8DOffset + 2 * row, 2);
        to_gguf_block(x8, dst[sb]);
    }
}

}  // namespace cactus
