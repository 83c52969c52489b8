// Attention row primitives: every ISA's multi-query forms against the generic ones on random rows
// of odd sizes, query grouping bit-exact against one query and one row at a time, and
// attention_group against attention_head (bit-exact) and the reference (tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ops_cpu.h"
#include "ops/ops_ref.h"
#include "ops/quant.h"

using namespace cactus;

namespace {

std::vector<const AttentionRowKernels*> all_tables() { return attention_row_tables(); }

const AttentionRowKernels* table_named(const char* name) {
    for (const AttentionRowKernels* t : all_tables())
        if (std::strcmp(t->isa_name, name) == 0) return t;
    return nullptr;
}

// n_rows rows of width n (row stride n + 3), n_q queries, weights, a shuffled subset of row ids.
struct Case {
    size_t n = 0, stride = 0, n_q = 0, groups = 0;
    std::vector<float> q, p, scales, out;
    std::vector<uint16_t> half;
    std::vector<int8_t> bytes;
    std::vector<uint32_t> ids;
};

Case random_case(size_t n, size_t n_rows, size_t n_q, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(-127, 127);
    Case c;
    c.n = n;
    c.stride = n + 3;
    c.n_q = n_q;
    c.groups = (n + 31) / 32 + 1;
    for (size_t i = 0; i < n_q * n; ++i) c.q.push_back(normal(rng));
    for (size_t i = 0; i < n_q * n; ++i) c.out.push_back(normal(rng));
    for (size_t i = 0; i < n_rows * c.stride; ++i) {
        c.half.push_back(fp32_to_fp16(normal(rng)));
        c.bytes.push_back(static_cast<int8_t>(byte(rng)));
    }
    for (size_t i = 0; i < n_rows * c.groups; ++i) c.scales.push_back(std::fabs(normal(rng)) * 0.01f + 1e-3f);
    for (uint32_t r = 0; r < n_rows; ++r) {
        if (rng() % 4 != 0) c.ids.push_back(r);
    }
    std::shuffle(c.ids.begin(), c.ids.end(), rng);
    for (size_t i = 0; i < n_q * c.ids.size(); ++i) c.p.push_back(std::fabs(normal(rng)) * 0.1f);
    return c;
}

// The four primitives of one table on the whole case: scores [n_q, ids] twice, outputs twice.
struct Results {
    std::vector<float> dots_f16, dots_q8, acc_f16, acc_q8;
};

Results run(const AttentionRowKernels& t, const Case& c) {
    const size_t ld = c.ids.size();
    const RowList rows = {c.ids.data(), c.ids.size()};
    const QueryBlock q = {c.q.data(), c.n, c.n_q};
    Results r;
    r.dots_f16.assign(c.n_q * ld, 0.0f);
    r.dots_q8.assign(c.n_q * ld, 0.0f);
    t.dots_f16(r.dots_f16.data(), ld, q, c.half.data(), c.stride, rows, c.n);
    t.dots_q8(r.dots_q8.data(), ld, q, c.bytes.data(), c.stride, c.scales.data(), c.groups, rows, c.n);
    r.acc_f16 = c.out;
    r.acc_q8 = c.out;
    const WeightBlock p = {c.p.data(), ld};
    t.accumulate_f16(OutputBlock{r.acc_f16.data(), c.n, c.n_q}, p, c.half.data(), c.stride, rows, c.n);
    t.accumulate_q8(OutputBlock{r.acc_q8.data(), c.n, c.n_q}, p, c.bytes.data(), c.stride, c.scales.data(), c.groups,
                    rows, c.n);
    return r;
}

// The same, one query and one row per call.
Results run_one_by_one(const AttentionRowKernels& t, const Case& c) {
    const size_t ld = c.ids.size();
    Results r;
    r.dots_f16.assign(c.n_q * ld, 0.0f);
    r.dots_q8.assign(c.n_q * ld, 0.0f);
    r.acc_f16 = c.out;
    r.acc_q8 = c.out;
    for (size_t j = 0; j < c.n_q; ++j) {
        const QueryBlock q = {c.q.data() + j * c.n, c.n, 1};
        for (size_t i = 0; i < ld; ++i) {
            const RowList row = {c.ids.data() + i, 1};
            t.dots_f16(&r.dots_f16[j * ld + i], 1, q, c.half.data(), c.stride, row, c.n);
            t.dots_q8(&r.dots_q8[j * ld + i], 1, q, c.bytes.data(), c.stride, c.scales.data(), c.groups, row, c.n);
            const WeightBlock p = {&c.p[j * ld + i], 1};
            t.accumulate_f16(OutputBlock{r.acc_f16.data() + j * c.n, c.n, 1}, p, c.half.data(), c.stride, row, c.n);
            t.accumulate_q8(OutputBlock{r.acc_q8.data() + j * c.n, c.n, 1}, p, c.bytes.data(), c.stride,
                            c.scales.data(), c.groups, row, c.n);
        }
    }
    return r;
}

void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

void expect_near(const std::vector<float>& want, const std::vector<float>& got, const char* what) {
    ASSERT_EQ(want.size(), got.size()) << what;
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(want[i], got[i], 1e-4f * (1.0f + std::fabs(want[i]))) << what << " at " << i;
}

const size_t kWidths[] = {1, 7, 8, 15, 16, 31, 32, 33, 64, 95, 128, 256, 257};
const size_t kQueries[] = {1, 2, 3, 4, 5, 7, 8};

}  // namespace

TEST(AttentionRows, OptimisedMatchGenericOnOddSizes) {
    std::mt19937 rng(11);
    size_t checked = 0;
    for (size_t n : kWidths) {
        for (size_t n_q : kQueries) {
            const Case c = random_case(n, 70 + n % 13, n_q, rng);
            const Results want = run(attention_row_kernels_generic(), c);
            for (const AttentionRowKernels* t : all_tables()) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " n_q=" << n_q);
                const Results got = run(*t, c);
                expect_near(want.dots_f16, got.dots_f16, "dots_f16");
                expect_near(want.dots_q8, got.dots_q8, "dots_q8");
                expect_near(want.acc_f16, got.acc_f16, "accumulate_f16");
                expect_near(want.acc_q8, got.acc_q8, "accumulate_q8");
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, std::size(kWidths) * std::size(kQueries) * all_tables().size());
    EXPECT_STRNE(attention_row_kernels().isa_name, "");
}

TEST(AttentionRows, GroupingQueriesAndRowsChangesNoBit) {
    std::mt19937 rng(12);
    for (const AttentionRowKernels* t : all_tables()) {
        for (size_t n : kWidths) {
            for (size_t n_q : kQueries) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " n_q=" << n_q);
                const Case c = random_case(n, 150, n_q, rng);  // > one 64-row block of values
                const Results grouped = run(*t, c);
                const Results single = run_one_by_one(*t, c);
                expect_bitwise_equal(grouped.dots_f16, single.dots_f16, "dots_f16");
                expect_bitwise_equal(grouped.dots_q8, single.dots_q8, "dots_q8");
                expect_bitwise_equal(grouped.acc_f16, single.acc_f16, "accumulate_f16");
                expect_bitwise_equal(grouped.acc_q8, single.acc_q8, "accumulate_q8");
            }
        }
    }
}

// A GQA group through attention_group: bit-exact with each head alone, close to the reference.
TEST(AttentionRows, GroupEqualsHeadsAndReference) {
    std::mt19937 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    AttentionWorkspace ws;
    for (size_t dim : {5u, 64u, 129u, 256u}) {
        for (size_t n_q : {1u, 3u, 4u, 6u}) {
            const size_t n_rows = 97, stride = 2 * dim;
            std::vector<uint16_t> k(n_rows * stride), v(n_rows * stride);
            for (size_t i = 0; i < k.size(); ++i) {
                k[i] = fp32_to_fp16(normal(rng));
                v[i] = fp32_to_fp16(normal(rng));
            }
            std::vector<int32_t> pos(n_rows);
            for (size_t r = 0; r < n_rows; ++r) pos[r] = (r % 11 == 3) ? -1 : static_cast<int32_t>((r * 13) % n_rows);
            std::vector<float> q(n_q * dim);
            for (float& x : q) x = normal(rng);
            const AttentionMask mask{80, 40, 4};
            const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
            std::vector<float> grouped(n_q * dim), alone(dim), want(dim);
            attention_group(AttentionQueries{q.data(), dim, grouped.data(), dim, n_q},
                            KvRowsF16{k.data() + dim, stride, v.data() + dim, stride},
                            AttentionShape{pos.data(), n_rows, dim, dim, scale, mask}, ws);
            for (size_t j = 0; j < n_q; ++j) {
                SCOPED_TRACE(testing::Message() << "dim=" << dim << " n_q=" << n_q << " head " << j);
                attention_head(alone.data(), q.data() + j * dim, k.data() + dim, stride, v.data() + dim, stride,
                               pos.data(), n_rows, dim, dim, scale, mask, ws);
                EXPECT_EQ(std::memcmp(alone.data(), grouped.data() + j * dim, dim * sizeof(float)), 0);
                attention_head_ref(want.data(), q.data() + j * dim, k.data() + dim, stride, v.data() + dim, stride,
                                   pos.data(), n_rows, dim, dim, scale, mask);
                for (size_t d = 0; d < dim; ++d) ASSERT_NEAR(want[d], alone[d], 2e-3f);
            }
        }
    }
}

// The AVX-512 f16 kernels are the AVX2 ones on wider registers: bit-identical results.
TEST(AttentionRows, Avx512EqualsAvx2BitForBit) {
    const AttentionRowKernels* avx2 = table_named("avx2");
    const AttentionRowKernels* avx512 = table_named("avx512");
    if (avx2 == nullptr || avx512 == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
    std::mt19937 rng(15);
    for (size_t n : kWidths) {
        for (size_t n_q : kQueries) {
            SCOPED_TRACE(testing::Message() << "n=" << n << " n_q=" << n_q);
            const Case c = random_case(n, 150, n_q, rng);
            const Results a = run(*avx2, c);
            const Results b = run(*avx512, c);
            expect_bitwise_equal(a.dots_f16, b.dots_f16, "dots_f16");
            expect_bitwise_equal(a.acc_f16, b.acc_f16, "accumulate_f16");
        }
    }
}

TEST(AttentionRows, SoftmaxMatchesGenericOnOddSizes) {
    std::mt19937 rng(14);
    std::normal_distribution<float> normal(0.0f, 30.0f);  // wide: some weights underflow to 0
    for (const AttentionRowKernels* t : all_tables()) {
        for (size_t n : {1u, 2u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u}) {
            for (bool round_half : {false, true}) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " half=" << round_half);
                std::vector<float> want(n);
                for (float& x : want) x = normal(rng);
                std::vector<float> got = want;
                attention_row_kernels_generic().softmax(want.data(), n, 0.7f, round_half);
                t->softmax(got.data(), n, 0.7f, round_half);
                double sum = 0.0;
                for (size_t i = 0; i < n; ++i) {
                    // one f16 step (2^-11 relative) when rounded, a few f32 ulps otherwise
                    ASSERT_NEAR(got[i], want[i], (round_half ? 1e-3f : 1e-6f) * want[i] + 1e-30f) << i;
                    sum += got[i];
                }
                EXPECT_NEAR(sum, 1.0, round_half ? 1e-3 * std::sqrt(static_cast<double>(n)) : 1e-5);
            }
        }
    }
}

TEST(AttentionRows, ChosenTableIsTheWidestThisCpuRuns) {
    if (std::getenv("CACTUS_CPU_ISA") != nullptr) GTEST_SKIP() << "CACTUS_CPU_ISA caps the chosen table";
    EXPECT_STREQ(attention_row_kernels().isa_name, all_tables().back()->isa_name);
}

// Half conversions: every table gives fp32_to_fp16's bits, ties and subnormals included.
TEST(AttentionRows, HalfConversionsMatchTheReferenceBitForBit) {
    std::mt19937 rng(16);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> src = {0.0f,
                              -0.0f,
                              1.0f,
                              65504.0f,
                              65520.0f,
                              -70000.0f,
                              1e-8f,
                              -3e-6f,
                              6.1e-5f,
                              1.0f + 1.0f / 2048.0f,
                              1.0f + 3.0f / 2048.0f,
                              2049.0f,
                              2051.0f};  // ties
    for (int i = 0; i < 1000; ++i) src.push_back(normal(rng) * std::exp2(static_cast<float>(i % 40 - 25)));
    const float* table = half_to_float_table();
    for (const AttentionRowKernels* t : all_tables()) {
        for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, src.size()}) {
            SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n);
            std::vector<uint16_t> h(n);
            std::vector<float> r(n);
            t->to_half(h.data(), src.data(), n);
            t->round_half(r.data(), src.data(), n);
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(h[i], fp32_to_fp16(src[i])) << src[i];
                ASSERT_EQ(std::memcmp(&r[i], &table[h[i]], sizeof(float)), 0) << src[i];
            }
        }
    }
}
