#include "backends/cpu/cpu_features.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace cactus {

namespace {

#if defined(__x86_64__) || defined(__i386__)
CpuFeatures detect() {
    __builtin_cpu_init();
    CpuFeatures f;
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512_vnni = f.avx2 && __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    return f;
}
#elif defined(__aarch64__) && defined(__linux__)
CpuFeatures detect() {
    constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP
    CpuFeatures f;
    f.neon_dotprod = (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
    return f;
}
#else
CpuFeatures detect() { return CpuFeatures{}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

}  // namespace cactus
