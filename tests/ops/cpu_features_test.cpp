// CACTUS_CPU_ISA: caps the kernel tier, never adds one, and rejects unknown values clearly.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_features.h"
#include "core/error.h"

using namespace cactus;

TEST(CpuFeatures, UnknownCapIsAClearError) {
    try {
        cpu_features_capped("sse9");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("CACTUS_CPU_ISA: unknown value 'sse9'"), std::string::npos) << e.what();
    }
}

TEST(CpuFeatures, CapsNeverAddFeatures) {
    const CpuFeatures all = cpu_features_capped(nullptr);
    int known = 0;
    for (const char* cap : {"", "generic", "avx2", "avx512", "amx", "neon", "neon_dotprod"}) {
        CpuFeatures f;
        try {
            f = cpu_features_capped(cap);
        } catch (const Error&) {
            continue;  // a name of another architecture
        }
        ++known;
        EXPECT_LE(f.avx2, all.avx2) << cap;
        EXPECT_LE(f.avx512_vnni, all.avx512_vnni) << cap;
        EXPECT_LE(f.amx_int8, all.amx_int8) << cap;
        EXPECT_LE(f.neon_dotprod, all.neon_dotprod) << cap;
    }
    EXPECT_GE(known, 2);
}

TEST(CpuFeatures, Avx2CapKeepsAvx2AndDropsAvx512) {
    const CpuFeatures all = cpu_features_capped(nullptr);
    if (!all.avx2) GTEST_SKIP() << "no AVX2 on this CPU";
    const CpuFeatures f = cpu_features_capped("avx2");
    EXPECT_TRUE(f.avx2);
    EXPECT_FALSE(f.avx512_vnni);
    EXPECT_FALSE(cpu_features_capped("generic").avx2);
}

TEST(CpuFeatures, Avx512CapDropsAmx) {
    const CpuFeatures all = cpu_features_capped(nullptr);
    if (!all.avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    const CpuFeatures f = cpu_features_capped("avx512");
    EXPECT_TRUE(f.avx512_vnni);
    EXPECT_FALSE(f.amx_int8);
    EXPECT_EQ(cpu_features_capped("amx").amx_int8, all.amx_int8);
    EXPECT_FALSE(cpu_features_capped("avx2").amx_int8);
}

TEST(CpuFeatures, DecodePrefetchChoiceOverridesTheDefaultAndRejectsUnknownValues) {
    const CpuFeatures detected = cpu_features_for(nullptr, nullptr);
    EXPECT_EQ(cpu_features_for(nullptr, "").decode_prefetch_l1, detected.decode_prefetch_l1);
    EXPECT_TRUE(cpu_features_for(nullptr, "l1").decode_prefetch_l1);
    EXPECT_FALSE(cpu_features_for(nullptr, "l2").decode_prefetch_l1);
    EXPECT_EQ(cpu_features_for(nullptr, "l1").avx2, detected.avx2);  // the ISA is not touched
    for (const char* bad : {"L1", "l3", "t0", "1"}) {
        try {
            cpu_features_for(nullptr, bad);
            ADD_FAILURE() << "accepted CACTUS_DECODE_PREFETCH=" << bad;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("CACTUS_DECODE_PREFETCH"), std::string::npos) << e.what();
        }
    }
}
