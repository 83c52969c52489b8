// aarch64 NEON kernels shared by the plain NEON and the NEON dotprod tables. This file is included
// inside an anonymous namespace of neon_kernels.cpp and neon_dotprod_kernels.cpp, each compiled for
// its own ISA, after that file defines the one primitive that differs:
//   int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b)
//     acc + the products a[k] * b[k] of 16 signed bytes, summed into 4 int32 lanes (which product
//     lands in which lane is up to the primitive: callers only ever add the lanes together).
// It mirrors src/backends/cpu/avx2/x86_quant_kernels.inl on 16-byte vectors. Layouts:
// src/ops/quant_blocks.h. Each kernel is tested against the scalar reference (tests/ops).

// ---- helpers -------------------------------------------------------------------------------------

// Hardware half conversions (fcvt, base ARMv8), bit-identical to fp16_to_fp32 / fp32_to_fp16
// (round to nearest even) for every non-NaN value.
inline float h2f(uint16_t h) {
    __fp16 v;
    std::memcpy(&v, &h, sizeof(v));
    return static_cast<float>(v);
}

inline uint16_t f2h(float f) {
    const __fp16 v = static_cast<__fp16>(f);
    uint16_t h;
    std::memcpy(&h, &v, sizeof(h));
    return h;
}

inline int8x16_t low_nibbles(uint8x16_t bytes) { return vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0F))); }

inline int8x16_t high_nibbles(uint8x16_t bytes) { return vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4)); }

// 16 bits (two little-endian bytes) -> 16 bytes of 0xFF (bit set) or 0x00.
inline uint8x16_t bits_to_bytes(const uint8_t* bits) {
    const uint8x16_t spread = vcombine_u8(vdup_n_u8(bits[0]), vdup_n_u8(bits[1]));
    const uint8x16_t probe = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(spread, probe);
}

// sum over 32 elements of a * b: a in two halves of 16, b 32 activations; as 4 int32 lanes
inline int32x4_t dot32(int8x16_t a_first, int8x16_t a_second, const int8_t* b) {
    const int32x4_t first = dot_s8(vdupq_n_s32(0), a_first, vld1q_s8(b));
    return dot_s8(first, a_second, vld1q_s8(b + 16));
}

// ---- 32-element formats --------------------------------------------------------------------------

float vec_dot_q4_0(const void* w, const void* x, size_t n) {
    const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < n / kQK32; ++i) {
        const uint8x16_t bits = vld1q_u8(a[i].qs);  // elements j (low nibble) and j + 16 (high)
        const int8x16_t lo = vsubq_s8(low_nibbles(bits), eight);
        const int8x16_t hi = vsubq_s8(high_nibbles(bits), eight);
        const float d = h2f(a[i].d) * h2f(b[i].d);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, b[i].qs)), d);
    }
    return vaddvq_f32(acc);
}

float vec_dot_q4_1(const void* w, const void* x, size_t n) {
    const BlockQ4_1* a = static_cast<const BlockQ4_1*>(w);
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
    float32x4_t acc = vdupq_n_f32(0.0f);
    float offsets = 0.0f;  // sum of m * s: the mins times the activation sums
    for (size_t i = 0; i < n / kQK32; ++i) {
        offsets += h2f(a[i].m) * h2f(b[i].s);
        const uint8x16_t bits = vld1q_u8(a[i].qs);
        const float d = h2f(a[i].d) * h2f(b[i].d);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(low_nibbles(bits), high_nibbles(bits), b[i].qs)), d);
    }
    return vaddvq_f32(acc) + offsets;
}

float vec_dot_q5_0(const void* w, const void* x, size_t n) {
    const BlockQ5_0* a = static_cast<const BlockQ5_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    const uint8x16_t low4 = vdupq_n_u8(0x0F), high4 = vdupq_n_u8(0xF0);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < n / kQK32; ++i) {
        // value - 16: a clear fifth bit makes the byte negative (0xF0 | nibble)
        const uint8x16_t bits = vld1q_u8(a[i].qs);
        const uint8x16_t lo = vorrq_u8(vandq_u8(bits, low4), vbicq_u8(high4, bits_to_bytes(a[i].qh)));
        const uint8x16_t hi = vorrq_u8(vshrq_n_u8(bits, 4), vbicq_u8(high4, bits_to_bytes(a[i].qh + 2)));
        const int32x4_t dot = dot32(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), b[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot), h2f(a[i].d) * h2f(b[i].d));
    }
    return vaddvq_f32(acc);
}

float vec_dot_q5_1(const void* w, const void* x, size_t n) {
    const BlockQ5_1* a = static_cast<const BlockQ5_1*>(w);
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
    const uint8x16_t low4 = vdupq_n_u8(0x0F), fifth = vdupq_n_u8(0x10);
    float32x4_t acc = vdupq_n_f32(0.0f);
    float offsets = 0.0f;  // sum of m * s: the mins times the activation sums
    for (size_t i = 0; i < n / kQK32; ++i) {
        offsets += h2f(a[i].m) * h2f(b[i].s);
        // value 0..31: nibble plus 16 where the fifth bit is set
        const uint8x16_t bits = vld1q_u8(a[i].qs);
        const uint8x16_t lo = vorrq_u8(vandq_u8(bits, low4), vandq_u8(fifth, bits_to_bytes(a[i].qh)));
        const uint8x16_t hi = vorrq_u8(vshrq_n_u8(bits, 4), vandq_u8(fifth, bits_to_bytes(a[i].qh + 2)));
        const int32x4_t dot = dot32(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), b[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot), h2f(a[i].d) * h2f(b[i].d));
    }
    return vaddvq_f32(acc) + offsets;
}

float vec_dot_q8_0(const void* w, const void* x, size_t n) {
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < n / kQK32; ++i) {
        const int32x4_t dot = dot32(vld1q_s8(a[i].qs), vld1q_s8(a[i].qs + 16), b[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot), h2f(a[i].d) * h2f(b[i].d));
    }
    return vaddvq_f32(acc);
}

// ---- K-quants ------------------------------------------------------------------------------------

// Q4_K / Q5_K packed scales -> bytes 0..7 scales, bytes 8..15 mins.
inline void unpack_k_scales(const uint8_t* packed, uint32_t* out /* [4] */) {
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    std::memcpy(out, packed, kKScaleBytes);
    out[3] = ((out[2] >> 4) & kLow4) | (((out[1] >> 6) & kLow2) << 4);
    const uint32_t mins_low = out[1] & kLow6;
    out[1] = (out[2] & kLow4) | (((out[0] >> 6) & kLow2) << 4);
    out[2] = mins_low;
    out[0] &= kLow6;
}

// sum_j mins[j] * (bsums[2j] + bsums[2j+1]) of a Q4_K / Q5_K super-block.
inline int k_mins_dot(const uint32_t* scales_mins, const int16_t* bsums) {
    const uint8x8_t mins8 = vld1_u8(reinterpret_cast<const uint8_t*>(scales_mins + 2));
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(mins8));
    const int16x8_t pair_sums = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));  // |.| <= 4096
    const int32x4_t p = vmull_s16(vget_low_s16(mins), vget_low_s16(pair_sums));
    return vaddvq_s32(vmlal_high_s16(p, mins, pair_sums));
}

// The integer part of a Q4_K / Q5_K super-block: sum_j scale[j] * dot(quants of sub-block j, q8).
// quants: [8 sub-blocks][2 halves of 16] unsigned values (< 32).
inline int k_scaled_dot(const uint8x16_t (*quants)[2], const uint8_t* scales, const int8_t* q8) {
    int32x4_t acc = vdupq_n_s32(0);
    for (size_t j = 0; j < 8; ++j) {
        const int32x4_t dot = dot32(vreinterpretq_s8_u8(quants[j][0]), vreinterpretq_s8_u8(quants[j][1]), q8 + 32 * j);
        acc = vmlaq_n_s32(acc, dot, scales[j]);
    }
    return vaddvq_s32(acc);
}

float vec_dot_q4_k(const void* w, const void* x, size_t n) {
    const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        uint32_t sm[4];
        unpack_k_scales(a[i].scales, sm);
        uint8x16_t quants[8][2];  // sub-block 2j: low nibbles of qs[32j..], 2j+1: high nibbles
        for (size_t j = 0; j < 4; ++j) {
            for (size_t h = 0; h < 2; ++h) {
                const uint8x16_t bits = vld1q_u8(a[i].qs + 32 * j + 16 * h);
                quants[2 * j][h] = vandq_u8(bits, low4);
                quants[2 * j + 1][h] = vshrq_n_u8(bits, 4);
            }
        }
        const int isum = k_scaled_dot(quants, reinterpret_cast<const uint8_t*>(sm), b[i].qs);
        const float d = b[i].d * h2f(a[i].d);
        const float dmin = b[i].d * h2f(a[i].dmin);
        sum += d * static_cast<float>(isum) - dmin * static_cast<float>(k_mins_dot(sm, b[i].bsums));
    }
    return sum;
}

// bit `bit` of each byte, moved to bit 4 (the fifth bit of a Q5_K quant)
inline uint8x16_t fifth_bit(uint8x16_t hbits, int bit) {
    const uint8x16_t shifted = vshlq_u8(hbits, vdupq_n_s8(static_cast<int8_t>(-bit)));
    return vshlq_n_u8(vandq_u8(shifted, vdupq_n_u8(1)), 4);
}

float vec_dot_q5_k(const void* w, const void* x, size_t n) {
    const BlockQ5_K* a = static_cast<const BlockQ5_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        uint32_t sm[4];
        unpack_k_scales(a[i].scales, sm);
        uint8x16_t quants[8][2];  // as Q4_K, plus bit 2j (sub-block 2j) or 2j+1 of qh as the fifth bit
        for (size_t h = 0; h < 2; ++h) {
            const uint8x16_t hbits = vld1q_u8(a[i].qh + 16 * h);
            for (int j = 0; j < 4; ++j) {
                const uint8x16_t bits = vld1q_u8(a[i].qs + 32 * j + 16 * h);
                quants[2 * j][h] = vorrq_u8(vandq_u8(bits, low4), fifth_bit(hbits, 2 * j));
                quants[2 * j + 1][h] = vorrq_u8(vshrq_n_u8(bits, 4), fifth_bit(hbits, 2 * j + 1));
            }
        }
        const int isum = k_scaled_dot(quants, reinterpret_cast<const uint8_t*>(sm), b[i].qs);
        const float d = b[i].d * h2f(a[i].d);
        const float dmin = b[i].d * h2f(a[i].dmin);
        sum += d * static_cast<float>(isum) - dmin * static_cast<float>(k_mins_dot(sm, b[i].bsums));
    }
    return sum;
}

// acc + scale * sum over 16 elements of (q - 32) * act, q in 0..63
inline int32x4_t q6_scaled_dot16(int32x4_t acc, uint8x16_t q, const int8_t* q8, int scale) {
    const int8x16_t centred = vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(32));
    return vmlaq_n_s32(acc, dot_s8(vdupq_n_s32(0), centred, vld1q_s8(q8)), scale);
}

float vec_dot_q6_k(const void* w, const void* x, size_t n) {
    const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
    const uint8x16_t low4 = vdupq_n_u8(0x0F), low2 = vdupq_n_u8(3);
    float sum = 0.0f;
    for (size_t i = 0; i < n / kQKK; ++i) {
        int32x4_t acc = vdupq_n_s32(0);
        for (size_t half = 0; half < 2; ++half) {  // 128 elements each
            const uint8_t* ql = a[i].ql + 64 * half;
            const uint8_t* qh = a[i].qh + 32 * half;
            const int8_t* sc = a[i].scales + 8 * half;
            const int8_t* q8 = b[i].qs + 128 * half;
            // quarter k (32 elements): low 4 bits from ql[32 * (k & 1)..] (low nibble for k < 2,
            // high for k >= 2), high 2 bits from bits 2k, 2k+1 of qh[0..32]; scales sc[2k], sc[2k+1]
            for (int k = 0; k < 4; ++k) {
                for (size_t h = 0; h < 2; ++h) {
                    const uint8x16_t bits = vld1q_u8(ql + 32 * (k & 1) + 16 * h);
                    const uint8x16_t lo = k < 2 ? vandq_u8(bits, low4) : vshrq_n_u8(bits, 4);
                    const uint8x16_t shifted = vshlq_u8(vld1q_u8(qh + 16 * h), vdupq_n_s8(static_cast<int8_t>(-2 * k)));
                    const uint8x16_t q = vorrq_u8(lo, vshlq_n_u8(vandq_u8(shifted, low2), 4));
                    acc = q6_scaled_dot16(acc, q, q8 + 32 * k + 16 * h, sc[2 * k + h]);
                }
            }
        }
        sum += b[i].d * h2f(a[i].d) * static_cast<float>(vaddvq_s32(acc));
    }
    return sum;
}

// ---- float weights -------------------------------------------------------------------------------

float vec_dot_f16(const void* w, const void* x, size_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (size_t k = 0; k < 4; ++k) {
            const float32x4_t wa = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4 * k)));
            acc[k] = vfmaq_f32(acc[k], wa, vld1q_f32(b + i + 4 * k));
        }
    }
    for (; i + 4 <= n; i += 4) {
        acc[0] = vfmaq_f32(acc[0], vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i))), vld1q_f32(b + i));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) sum += h2f(a[i]) * b[i];
    return sum;
}

float vec_dot_bf16(const void* w, const void* x, size_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (size_t k = 0; k < 2; ++k) {
            const float32x4_t wa = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 4 * k), 16));
            acc[k] = vfmaq_f32(acc[k], wa, vld1q_f32(b + i + 4 * k));
        }
    }
    float sum = vaddvq_f32(vaddq_f32(acc[0], acc[1]));
    for (; i < n; ++i) sum += bf16_to_fp32(a[i]) * b[i];
    return sum;
}

float vec_dot_f32(const void* w, const void* x, size_t n) {
    const float* a = static_cast<const float*>(w);
    const float* b = static_cast<const float*>(x);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (size_t k = 0; k < 4; ++k) acc[k] = vfmaq_f32(acc[k], vld1q_f32(a + i + 4 * k), vld1q_f32(b + i + 4 * k));
    }
    for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(a + i), vld1q_f32(b + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// ---- activation quantizers (bit-exact with the references) ---------------------------------------

// Four vectors of 4 int32 (each in int8 range) -> 16 int8 in order.
inline int8x16_t narrow_to_i8(const int32x4_t* q /* [4] */) {
    const int16x8_t first = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
    const int16x8_t second = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
    return vcombine_s8(vqmovn_s16(first), vqmovn_s16(second));
}

// One block of 32 as in quantize_row_q8_0_ref; returns sum(qs) and the unrounded scale.
inline int quantize_block_q8(const float* x, int8_t* qs, float* d_out) {
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (size_t k = 0; k < 8; ++k) {
        v[k] = vld1q_f32(x + 4 * k);
        amax = vmaxq_f32(amax, vabsq_f32(v[k]));
    }
    const float d = vmaxvq_f32(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32x4_t q[8];
    int32x4_t sum = vdupq_n_s32(0);
    for (size_t k = 0; k < 8; ++k) {
        q[k] = vcvtaq_s32_f32(vmulq_n_f32(v[k], id));  // roundf: nearest, ties away from zero
        sum = vaddq_s32(sum, q[k]);
    }
    vst1q_s8(qs, narrow_to_i8(q));
    vst1q_s8(qs + 16, narrow_to_i8(q + 4));
    *d_out = d;
    return vaddvq_s32(sum);
}

void quantize_row_q8_0(void* dst, const float* src, size_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i) {
        float d;
        quantize_block_q8(src + i * kQK32, b[i].qs, &d);
        b[i].d = f2h(d);
    }
}

void quantize_row_q8_1(void* dst, const float* src, size_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
    for (size_t i = 0; i < n / kQK32; ++i) {
        float d;
        const int sum = quantize_block_q8(src + i * kQK32, b[i].qs, &d);
        b[i].d = f2h(d);
        b[i].s = f2h(static_cast<float>(sum) * d);
    }
}

// As quantize_row_q8_K_ref: the scale comes from the first element of largest magnitude, and
// values round to nearest even (ggml's nearest_int).
void quantize_row_q8_k(void* dst, const float* src, size_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
    for (size_t i = 0; i < n / kQKK; ++i, src += kQKK) {
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (size_t j = 0; j < kQKK; j += 4) amax_v = vmaxq_f32(amax_v, vabsq_f32(vld1q_f32(src + j)));
        const float amax = vmaxvq_f32(amax_v);
        if (amax == 0.0f) {
            std::memset(&b[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        size_t first = 0;
        while (std::fabs(src[first]) != amax) ++first;
        const float iscale = -127.0f / src[first];
        for (size_t j = 0; j < kQKK; j += 16) {
            int32x4_t q[4];
            int32x4_t sum = vdupq_n_s32(0);
            for (size_t k = 0; k < 4; ++k) {
                const int32x4_t rounded = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + j + 4 * k), iscale));
                q[k] = vminq_s32(rounded, vdupq_n_s32(127));
                sum = vaddq_s32(sum, q[k]);
            }
            vst1q_s8(b[i].qs + j, narrow_to_i8(q));
            b[i].bsums[j / 16] = static_cast<int16_t>(vaddvq_s32(sum));
        }
        b[i].d = 1.0f / iscale;
    }
}

// ---- the table -----------------------------------------------------------------------------------

void set_neon_entries(CpuKernels& t) {
    t.vec_dot[static_cast<size_t>(DType::Q4_0)] = vec_dot_q4_0;
    t.vec_dot[static_cast<size_t>(DType::Q4_1)] = vec_dot_q4_1;
    t.vec_dot[static_cast<size_t>(DType::Q5_0)] = vec_dot_q5_0;
    t.vec_dot[static_cast<size_t>(DType::Q5_1)] = vec_dot_q5_1;
    t.vec_dot[static_cast<size_t>(DType::Q8_0)] = vec_dot_q8_0;
    t.vec_dot[static_cast<size_t>(DType::Q4_K)] = vec_dot_q4_k;
    t.vec_dot[static_cast<size_t>(DType::Q5_K)] = vec_dot_q5_k;
    t.vec_dot[static_cast<size_t>(DType::Q6_K)] = vec_dot_q6_k;
    t.vec_dot[static_cast<size_t>(DType::F16)] = vec_dot_f16;
    t.vec_dot[static_cast<size_t>(DType::BF16)] = vec_dot_bf16;
    t.vec_dot[static_cast<size_t>(DType::F32)] = vec_dot_f32;
    t.quantize_row[static_cast<size_t>(DType::Q8_0)] = quantize_row_q8_0;
    t.quantize_row[static_cast<size_t>(DType::Q8_1)] = quantize_row_q8_1;
    t.quantize_row[static_cast<size_t>(DType::Q8_K)] = quantize_row_q8_k;
}
