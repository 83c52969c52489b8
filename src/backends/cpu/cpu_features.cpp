#include "backends/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cactus {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// AMX-TILE and AMX-INT8 (cpuid leaf 7, EDX bits 24 and 25), read directly: clang 14's
// __builtin_cpu_supports does not know them.
bool cpu_has_amx_int8() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    return (d & (1u << 24)) != 0 && (d & (1u << 25)) != 0;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
// The CPU family of an AMD CPU (base + extended family of cpuid leaf 1; Zen 5 is 0x1A), 0 for other
// vendors.
unsigned amd_family() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return 0;
    const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "Auth" "enti" "cAMD"
    if (!amd || __get_cpuid(1, &a, &b, &c, &d) == 0) return 0;
    const unsigned base = (a >> 8) & 0xF;
    return base == 0xF ? base + ((a >> 20) & 0xFF) : base;
}
#endif

#if defined(__x86_64__) && defined(__linux__)
// Linux hands out the 8 KiB AMX tile state only to processes that ask for it (once, for every
// thread); without it the first tile instruction raises SIGILL. False where the kernel refuses.
bool linux_grants_amx_tiles() {
    constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl ARCH_REQ_XCOMP_PERM
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#elif defined(__x86_64__) || defined(__i386__)
bool linux_grants_amx_tiles() { return false; }
#endif

#if defined(__x86_64__) || defined(__i386__)
CpuFeatures detect() {
    __builtin_cpu_init();
    CpuFeatures f;
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512_vnni = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vnni");
    f.amx_int8 = f.avx512_vnni && cpu_has_amx_int8() && linux_grants_amx_tiles();
    f.decode_prefetch_l1 = amd_family() >= 0x1A;
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

// CACTUS_CPU_ISA caps the kernel tier below what the CPU has (to benchmark or debug a tier on a
// bigger CPU); a tier the CPU lacks is never turned on. Unknown values are an error.
CpuFeatures apply_cap(CpuFeatures f, const char* cap) {
    if (cap == nullptr || *cap == '\0') return f;
#if defined(__x86_64__) || defined(__i386__)
    if (std::strcmp(cap, "amx") == 0) return f;
    if (std::strcmp(cap, "avx512") == 0) {
        f.amx_int8 = false;
        return f;
    }
    if (std::strcmp(cap, "avx2") == 0) {
        f.avx512_vnni = f.amx_int8 = false;
        return f;
    }
    if (std::strcmp(cap, "generic") == 0) return CpuFeatures{};
    fail("CACTUS_CPU_ISA: unknown value '%s' (on x86-64: generic, avx2, avx512, amx)", cap);
#elif defined(__aarch64__)
    if (std::strcmp(cap, "neon_dotprod") == 0) return f;
    if (std::strcmp(cap, "neon") == 0) {
        f.neon_dotprod = false;
        return f;
    }
    fail("CACTUS_CPU_ISA: unknown value '%s' (on aarch64: neon, neon_dotprod)", cap);
#else
    if (std::strcmp(cap, "generic") == 0) return f;
    fail("CACTUS_CPU_ISA: unknown value '%s' (on this CPU: generic)", cap);
#endif
}

CpuFeatures apply_decode_prefetch(CpuFeatures f, const char* choice) {
    if (choice == nullptr || *choice == '\0') return f;
    if (std::strcmp(choice, "l1") == 0 || std::strcmp(choice, "l2") == 0) {
        f.decode_prefetch_l1 = choice[1] == '1';
        return f;
    }
    fail("CACTUS_DECODE_PREFETCH: unknown value '%s' (l1, l2)", choice);
}

}  // namespace

CpuFeatures cpu_features_capped(const char* cap) { return cpu_features_for(cap, nullptr); }

CpuFeatures cpu_features_for(const char* cap, const char* decode_prefetch) {
    return apply_decode_prefetch(apply_cap(detect(), cap), decode_prefetch);
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features =
        cpu_features_for(std::getenv("CACTUS_CPU_ISA"), std::getenv("CACTUS_DECODE_PREFETCH"));
    return features;
}

}  // namespace cactus
