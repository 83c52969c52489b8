#pragma once
// exp on 4 floats (AArch64 ASIMD): the polynomial of exp_avx2.h (Cephes' single precision, within
// about 1 ulp of expf). Results are 0 below -87.3 and +inf above 88.7.
#include <arm_neon.h>

namespace cactus {

inline float32x4_t exp_neon(float32x4_t x) {
    const uint32x4_t below = vcltq_f32(x, vdupq_n_f32(-87.3f));
    const uint32x4_t above = vcgtq_f32(x, vdupq_n_f32(88.7f));
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.7f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    x = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    x = vfmsq_f32(x, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t y = vdupq_n_f32(1.9875691500e-4f);
    y = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), y, x);
    y = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), y, x);
    y = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), y, x);
    y = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), y, x);
    y = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), y, x);
    y = vfmaq_f32(vaddq_f32(x, vdupq_n_f32(1.0f)), y, vmulq_f32(x, x));
    // 2^n in two steps, so n = 128 (x near 88.7) does not overflow the exponent field
    const int32x4_t n_int = vcvtq_s32_f32(n);
    const int32x4_t half = vshrq_n_s32(n_int, 1);
    const float32x4_t p1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(half, vdupq_n_s32(127)), 23));
    const float32x4_t p2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(n_int, half), vdupq_n_s32(127)), 23));
    y = vmulq_f32(vmulq_f32(y, p1), p2);
    y = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), below));
    return vbslq_f32(above, vdupq_n_f32(__builtin_inff()), y);
}

}  // namespace cactus
