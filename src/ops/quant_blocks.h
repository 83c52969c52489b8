#pragma once
// Byte layouts of the GGML block formats, identical to ggml's ggml-common.h (GGUF files are read
// in place, so every field, order and size must match). Half-precision fields are raw uint16_t.
#include <cstddef>
#include <cstdint>

namespace cactus {

constexpr size_t kQK32 = 32;         // elements per block of the 32-element formats
constexpr size_t kQKK = 256;         // elements per super-block of the K-quants
constexpr size_t kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

struct BlockQ4_0 {
    uint16_t d;             // scale (fp16)
    uint8_t qs[kQK32 / 2];  // nibbles: element j in low half of qs[j], j+16 in high half
};
struct BlockQ4_1 {
    uint16_t d;  // scale (fp16)
    uint16_t m;  // minimum (fp16)
    uint8_t qs[kQK32 / 2];
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];  // fifth bits, bit j for element j (little-endian uint32)
    uint8_t qs[kQK32 / 2];
};
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK32 / 2];
};
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK32];
};
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;  // d * sum(qs) (fp16)
    int8_t qs[kQK32];
};
struct BlockQ2_K {
    uint8_t scales[kQKK / 16];  // low nibble scale, high nibble min, per 16 elements
    uint8_t qs[kQKK / 4];       // 2-bit quants
    uint16_t d;                 // super-block scale of the scales
    uint16_t dmin;              // super-block scale of the mins
};
struct BlockQ3_K {
    uint8_t hmask[kQKK / 8];  // high bit of each 3-bit quant
    uint8_t qs[kQKK / 4];     // low 2 bits
    uint8_t scales[12];       // 16 six-bit scales, packed
    uint16_t d;
};
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleBytes];  // 8 six-bit scales and 8 six-bit mins, packed
    uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleBytes];
    uint8_t qh[kQKK / 8];
    uint8_t qs[kQKK / 2];
};
struct BlockQ6_K {
    uint8_t ql[kQKK / 2];      // low 4 bits
    uint8_t qh[kQKK / 4];      // high 2 bits
    int8_t scales[kQKK / 16];  // 8-bit scales per 16 elements
    uint16_t d;
};
struct BlockQ8_K {
    float d;
    int8_t qs[kQKK];
    int16_t bsums[kQKK / 16];  // sums of qs per 16 elements
};

static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 layout");
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 layout");
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 layout");
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 layout");
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 layout");
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 layout");
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K layout");
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K layout");
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K layout");
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K layout");
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K layout");
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K layout");

// Scale j (< 8) and min j of a Q4_K / Q5_K super-block from the 12 packed bytes.
inline void unpack_k_scale_min(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min) {
    if (j < 4) {
        *scale = scales[j] & 63;
        *min = scales[j + 4] & 63;
    } else {
        *scale = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
        *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

}  // namespace cactus
