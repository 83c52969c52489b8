#include "ops/q4_k_x8.h"

#include <cstring>

#include "core/error.h"
#include "ops/repack_groups.h"

namespace cactus {

namespace {

static_assert(kQ4KX8GroupBytes == 4 * 256 + 4 * 32 + 2 * 16, "Q4_K_X8 group layout");
static_assert(kQ4KX8DminOffset == kQ4KX8DOffset + 16 && kQ4KX8DOffset == kQ4KX8ScaleOffset + 128, "offsets");

// The 6-bit packing of Q4_K (8 scales, 8 mins in 12 bytes) -> bytes 0..7 scales, 8..15 mins.
void unpack_scales(const uint8_t* packed, uint8_t* out) {
    for (int i = 0; i < 4; ++i) {
        out[i] = packed[i] & 63;
        out[8 + i] = packed[4 + i] & 63;
        out[4 + i] = static_cast<uint8_t>((packed[8 + i] & 0x0F) | ((packed[i] >> 6) << 4));
        out[12 + i] = static_cast<uint8_t>((packed[8 + i] >> 4) | ((packed[4 + i] >> 6) << 4));
    }
}

// The inverse: every bit of the 12 bytes is used, so the bytes come back exactly.
void pack_scales(const uint8_t* bytes, uint8_t* packed) {
    for (int i = 0; i < 4; ++i) {
        packed[i] = static_cast<uint8_t>((bytes[i] & 63) | ((bytes[4 + i] >> 4) << 6));
        packed[4 + i] = static_cast<uint8_t>((bytes[8 + i] & 63) | ((bytes[12 + i] >> 4) << 6));
        packed[8 + i] = static_cast<uint8_t>((bytes[4 + i] & 0x0F) | ((bytes[12 + i] & 0x0F) << 4));
    }
}

}  // namespace

void repack_q4_k_x8(uint8_t* dst, const uint8_t* src, size_t src_row_bytes, size_t n_rows, size_t n) {
    repack_groups<BlockQ4_K, kQKK>("repack_q4_k_x8", dst, src, src_row_bytes, n_rows, n, kQ4KX8GroupBytes,
                                   [](uint8_t* group, size_t r, const BlockQ4_K& b) {
                                       for (int j = 0; j < 4; ++j) {
                                           for (int h = 0; h < 2; ++h)
                                               std::memcpy(group + q4_k_x8_part_offset(r, j, h), b.qs + 32 * j + 16 * h,
                                                           16);
                                       }
                                       unpack_scales(b.scales, group + q4_k_x8_scale_offset(r));
                                       std::memcpy(group + kQ4KX8DOffset + 2 * r, &b.d, 2);
                                       std::memcpy(group + kQ4KX8DminOffset + 2 * r, &b.dmin, 2);
                                   });
}

void q4_k_x8_row_blocks(BlockQ4_K* dst, const uint8_t* group, size_t row, size_t n) {
    CACTUS_ASSERT(row < kQ4KX8Rows && n % kQKK == 0);
    for (size_t sb = 0; sb < n / kQKK; ++sb, group += kQ4KX8GroupBytes) {
        BlockQ4_K& b = dst[sb];
        for (int j = 0; j < 4; ++j) {
            for (int h = 0; h < 2; ++h) std::memcpy(b.qs + 32 * j + 16 * h, group + q4_k_x8_part_offset(row, j, h), 16);
        }
        pack_scales(group + q4_k_x8_scale_offset(row), b.scales);
        std::memcpy(&b.d, group + kQ4KX8DOffset + 2 * row, 2);
        std::memcpy(&b.dmin, group + kQ4KX8DminOffset + 2 * row, 2);
    }
}

}  // namespace cactus
