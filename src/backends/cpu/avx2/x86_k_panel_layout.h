#pragma once
// The K-quant row panels shared by the AVX2 kernels (avx2_k_panels.inl: packing, activation facts,
// vec_dot, decode, 256-bit panel product) and the AVX-512 table's 512-bit panel product
// (avx512/avx512_k_panels.inl), which both read this layout and sum in the same order.
#include <cstddef>

#include "backends/cpu/cpu_kernels.h"

namespace cactus {

// Panel of kPanelRows rows, per super-block (kKPanelBytes, 8 * kPanelBlockBytes: the 32-element
// formats' scratch of the same n holds it); every field is 16 lanes of 4 bytes, lane r = row r, so a
// half of 8 rows is the field's offset + 32 * h:
//   u8  quants[64][16][4]   group g: quants 4g..4g+3 of each row (chunk g / 8)
//   i16 scale words[8][16][2]  Q4_K/Q5_K: (scale_c, scale_c); Q6_K: (scale_2c, scale_2c+1)
//   i16 min words[4][16][2]    Q4_K/Q5_K: (min_2k, min_2k+1); Q6_K: unused
//   f32 d[16], dmin[16]        (Q6_K: dmin 0)
constexpr size_t kKPanelBytes = 8 * kPanelBlockBytes;
constexpr size_t kKScaleOffset = 64 * kPanelGroupBytes;
constexpr size_t kKMinOffset = kKScaleOffset + 8 * kPanelGroupBytes;
constexpr size_t kKDOffset = kKMinOffset + 4 * kPanelGroupBytes;
constexpr size_t kKDminOffset = kKDOffset + kPanelGroupBytes;
static_assert(kKDminOffset + kPanelGroupBytes <= kKPanelBytes, "K panel layout");

// What the panel products need to know of a format: whether it has minimums (Q4_K, Q5_K), and how
// many groups of 4 quants add their vpmaddubsw pair sums in int16 before one vpmaddwd with the scale
// (the int16 bounds in avx2_k_panels.inl).
struct Q4_KPanelFacts {
    static constexpr bool kHasMins = true;
    static constexpr int kGroupsPerSum = 8;
};
struct Q5_KPanelFacts {
    static constexpr bool kHasMins = true;
    static constexpr int kGroupsPerSum = 4;
};
struct Q6_KPanelFacts {
    static constexpr bool kHasMins = false;
    static constexpr int kGroupsPerSum = 4;  // with the offset subtracted in int16
};

}  // namespace cactus
