// Every ISA's attention row primitives against the generic ones, on random rows of odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_features.h"
#include "ops/quant.h"

using namespace cactus;

namespace {

std::vector<const AttentionRowKernels*> optimised_tables() {
    std::vector<const AttentionRowKernels*> tables;
    if (cpu_features().avx2) tables.push_back(&attention_row_kernels_avx2());
    return tables;
}

struct Rows {
    std::vector<float> q, out_a, out_b, scales;
    std::vector<uint16_t> half;
    std::vector<int8_t> bytes;
};

Rows random_rows(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(-127, 127);
    Rows r;
    for (size_t i = 0; i < n; ++i) {
        r.q.push_back(normal(rng));
        r.half.push_back(fp32_to_fp16(normal(rng)));
        r.bytes.push_back(static_cast<int8_t>(byte(rng)));
        r.out_a.push_back(normal(rng));
    }
    r.out_b = r.out_a;
    for (size_t g = 0; g < (n + 31) / 32; ++g) r.scales.push_back(std::fabs(normal(rng)) * 0.01f + 1e-3f);
    return r;
}

}  // namespace

TEST(AttentionRows, OptimisedMatchGenericOnOddSizes) {
    const AttentionRowKernels& ref = attention_row_kernels_generic();
    std::mt19937 rng(11);
    size_t checked = 0;
    for (const AttentionRowKernels* t : optimised_tables()) {
        for (size_t n : {1u, 7u, 8u, 15u, 31u, 32u, 33u, 64u, 95u, 128u, 256u, 257u}) {
            Rows r = random_rows(n, rng);
            float a = ref.dot_f16(r.q.data(), r.half.data(), n);
            float b = t->dot_f16(r.q.data(), r.half.data(), n);
            EXPECT_NEAR(a, b, 1e-4f * (1.0f + std::fabs(a))) << t->isa_name << " dot_f16 n=" << n;
            a = ref.dot_q8(r.q.data(), r.bytes.data(), r.scales.data(), n);
            b = t->dot_q8(r.q.data(), r.bytes.data(), r.scales.data(), n);
            EXPECT_NEAR(a, b, 1e-4f * (1.0f + std::fabs(a))) << t->isa_name << " dot_q8 n=" << n;
            ref.axpy_f16(r.out_a.data(), 0.37f, r.half.data(), n);
            t->axpy_f16(r.out_b.data(), 0.37f, r.half.data(), n);
            ref.axpy_q8(r.out_a.data(), -0.61f, r.bytes.data(), r.scales.data(), n);
            t->axpy_q8(r.out_b.data(), -0.61f, r.bytes.data(), r.scales.data(), n);
            for (size_t i = 0; i < n; ++i) ASSERT_NEAR(r.out_a[i], r.out_b[i], 1e-5f) << t->isa_name << " axpy n=" << n;
            ++checked;
        }
    }
    if (cpu_features().avx2) {
        EXPECT_GT(checked, 0u);
    }
    EXPECT_STRNE(attention_row_kernels().isa_name, "");
}
