#pragma once
// What the CPU we run on can do, read once (cpuid via __builtin_cpu_supports on x86, getauxval
// HWCAP on aarch64). Only the kernel table (cpu_kernels.cpp) should need it.
namespace cactus {

struct CpuFeatures {
    bool avx2 = false;          // with FMA and F16C
    bool avx512_vnni = false;   // AVX-512 F, BW, VL, DQ and VNNI
    bool amx_int8 = false;      // with avx512_vnni: AMX tiles with int8 products, and Linux lets us use them
    bool neon_dotprod = false;  // aarch64 ASIMD dot product (sdot/udot)
    // x86 one-token decode kernels prefetch the next panel of rows into L1 (true) or L2 (false). L1
    // on AMD family 0x1A and later (Zen 5: 1.2-1.3x faster decode than L2), L2 elsewhere (Zen 4:
    // L1 was 1.8x slower for Q8_0 from memory; Sapphire Rapids: 1.3x slower). Override:
    // CACTUS_DECODE_PREFETCH=l1 or l2.
    bool decode_prefetch_l1 = false;
};

// Read once; the environment variable CACTUS_CPU_ISA caps the tier (x86-64: generic, avx2, avx512,
// amx; aarch64: neon, neon_dotprod), e.g. to benchmark the AVX2 kernels on an AVX-512 CPU. An unknown
// value throws cactus::Error on first use (every kernel table is chosen through this).
const CpuFeatures& cpu_features();
// The detected features capped by `cap` (nullptr or "" = no cap); throws on an unknown value.
CpuFeatures cpu_features_capped(const char* cap);
// The same, then the decode prefetch choice (nullptr or "" = the CPU's default, "l1", "l2"); throws on
// an unknown value. cpu_features() is cpu_features_for($CACTUS_CPU_ISA, $CACTUS_DECODE_PREFETCH).
CpuFeatures cpu_features_for(const char* cap, const char* decode_prefetch);

}  // namespace cactus
