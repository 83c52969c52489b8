#pragma once
// What the CPU we run on can do, read once (cpuid via __builtin_cpu_supports on x86, getauxval
// HWCAP on aarch64). Only the kernel table (cpu_kernels.cpp) should need it.
namespace cactus {

struct CpuFeatures {
    bool avx2 = false;          // with FMA and F16C
    bool avx512_vnni = false;   // AVX-512 F, BW, VL, DQ and VNNI
    bool amx_int8 = false;      // with avx512_vnni: AMX tiles with int8 products, and Linux lets us use them
    bool neon_dotprod = false;  // aarch64 ASIMD dot product (sdot/udot)
};

// Read once; the environment variable CACTUS_CPU_ISA caps the tier (x86-64: generic, avx2, avx512,
// amx; aarch64: neon, neon_dotprod), e.g. to benchmark the AVX2 kernels on an AVX-512 CPU. An unknown
// value throws cactus::Error on first use (every kernel table is chosen through this).
const CpuFeatures& cpu_features();
// The detected features capped by `cap` (nullptr or "" = no cap); throws on an unknown value.
CpuFeatures cpu_features_capped(const char* cap);

}  // namespace cactus
