#pragma once
// What the CPU we run on can do, read once (cpuid via __builtin_cpu_supports on x86, getauxval
// HWCAP on aarch64). Only the kernel table (cpu_kernels.cpp) should need it.
namespace cactus {

struct CpuFeatures {
    bool avx2 = false;        // with FMA and F16C
    bool avx512_vnni = false; // AVX-512 F, BW, VL, DQ and VNNI
    bool neon_dotprod = false;  // aarch64 ASIMD dot product (sdot/udot)
};

const CpuFeatures& cpu_features();

}  // namespace cactus
