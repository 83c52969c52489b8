// The f32 row primitives of every attention row table (kv_cache_type "f32"; attention_rows.h):
// each ISA's multi-query forms against the generic ones on random rows of odd widths up to 512,
// query and row grouping bit-exact against one query and one row at a time, and AVX-512 bit for bit
// AVX2. Attention over f32 rows against its reference: tests/kv/test_kv_f32.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/attention_rows.h"

namespace cactus {
namespace {

std::vector<float> normal_floats(std::mt19937& rng, size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> normal(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

struct RowCase {
    size_t n = 0, stride = 0, n_q = 0;
    std::vector<float> q, p, rows, out;
    std::vector<uint32_t> ids;
};

RowCase random_row_case(std::mt19937& rng, size_t n, size_t n_rows, size_t n_q) {
    RowCase c;
    c.n = n;
    c.stride = n + 5;
    c.n_q = n_q;
    c.q = normal_floats(rng, n_q * n);
    c.out = normal_floats(rng, n_q * n);
    c.rows = normal_floats(rng, n_rows * c.stride);
    for (uint32_t r = 0; r < n_rows; ++r)
        if (rng() % 4 != 0) c.ids.push_back(r);
    std::shuffle(c.ids.begin(), c.ids.end(), rng);
    for (size_t i = 0; i < n_q * c.ids.size(); ++i) c.p.push_back(std::fabs(normal_floats(rng, 1)[0]) * 0.1f);
    return c;
}

struct RowResults {
    std::vector<float> dots, acc;
};

RowResults run_rows(const AttentionRowKernels& t, const RowCase& c) {
    const size_t ld = c.ids.size();
    RowResults r;
    r.dots.assign(c.n_q * ld, 0.0f);
    r.acc = c.out;
    const RowList rows = {c.ids.data(), ld};
    t.dots_f32(r.dots.data(), ld, QueryBlock{c.q.data(), c.n, c.n_q}, c.rows.data(), c.stride, rows, c.n);
    t.accumulate_f32(OutputBlock{r.acc.data(), c.n, c.n_q}, WeightBlock{c.p.data(), ld}, c.rows.data(), c.stride, rows,
                     c.n);
    return r;
}

RowResults run_rows_one_by_one(const AttentionRowKernels& t, const RowCase& c) {
    const size_t ld = c.ids.size();
    RowResults r;
    r.dots.assign(c.n_q * ld, 0.0f);
    r.acc = c.out;
    for (size_t j = 0; j < c.n_q; ++j) {
        for (size_t i = 0; i < ld; ++i) {
            const RowList row = {c.ids.data() + i, 1};
            t.dots_f32(&r.dots[j * ld + i], 1, QueryBlock{c.q.data() + j * c.n, c.n, 1}, c.rows.data(), c.stride, row,
                       c.n);
            t.accumulate_f32(OutputBlock{r.acc.data() + j * c.n, c.n, 1}, WeightBlock{&c.p[j * ld + i], 1},
                             c.rows.data(), c.stride, row, c.n);
        }
    }
    return r;
}

const size_t kWidths[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 95, 128, 255, 256, 257, 511, 512};
const size_t kQueries[] = {1, 2, 3, 4, 5, 7, 8};

const AttentionRowKernels* table_named(const char* name) {
    for (const AttentionRowKernels* t : attention_row_tables())
        if (std::strcmp(t->isa_name, name) == 0) return t;
    return nullptr;
}

TEST(AttentionRowsF32, RowKernelsOfEveryTableMatchGeneric) {
    std::mt19937 rng(3);
    size_t checked = 0;
    for (size_t n : kWidths) {
        for (size_t n_q : kQueries) {
            const RowCase c = random_row_case(rng, n, 70 + n % 13, n_q);
            const RowResults want = run_rows(attention_row_kernels_generic(), c);
            for (const AttentionRowKernels* t : attention_row_tables()) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " n_q=" << n_q);
                ASSERT_NE(t->dots_f32, nullptr);
                ASSERT_NE(t->accumulate_f32, nullptr);
                const RowResults got = run_rows(*t, c);
                // f32 sums in another order: a few ulps of the terms' magnitude (sqrt(n) for a dot).
                for (size_t i = 0; i < want.dots.size(); ++i)
                    ASSERT_NEAR(got.dots[i], want.dots[i], 1e-5f * (1.0f + std::sqrt(static_cast<float>(n))));
                for (size_t i = 0; i < want.acc.size(); ++i)
                    ASSERT_NEAR(got.acc[i], want.acc[i], 1e-5f * (1.0f + std::fabs(want.acc[i])));
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, std::size(kWidths) * std::size(kQueries) * attention_row_tables().size());
}

TEST(AttentionRowsF32, GroupingQueriesAndRowsChangesNoBit) {
    std::mt19937 rng(4);
    for (const AttentionRowKernels* t : attention_row_tables()) {
        for (size_t n : kWidths) {
            for (size_t n_q : kQueries) {
                SCOPED_TRACE(testing::Message() << t->isa_name << " n=" << n << " n_q=" << n_q);
                const RowCase c = random_row_case(rng, n, 150, n_q);  // > one 64-row block of values
                const RowResults grouped = run_rows(*t, c), single = run_rows_one_by_one(*t, c);
                ASSERT_TRUE(same_bits(grouped.dots.data(), single.dots.data(), grouped.dots.size()));
                ASSERT_TRUE(same_bits(grouped.acc.data(), single.acc.data(), grouped.acc.size()));
            }
        }
    }
}

// As for f16 rows: the AVX-512 kernels are the AVX2 ones on wider registers, bit for bit.
TEST(AttentionRowsF32, Avx512EqualsAvx2BitForBit) {
    const AttentionRowKernels* avx2 = table_named("avx2");
    const AttentionRowKernels* avx512 = table_named("avx512");
    if (avx2 == nullptr || avx512 == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
    std::mt19937 rng(5);
    for (size_t n : kWidths) {
        for (size_t n_q : kQueries) {
            SCOPED_TRACE(testing::Message() << "n=" << n << " n_q=" << n_q);
            const RowCase c = random_row_case(rng, n, 150, n_q);
            const RowResults a = run_rows(*avx2, c), b = run_rows(*avx512, c);
            ASSERT_TRUE(same_bits(a.dots.data(), b.dots.data(), a.dots.size()));
            ASSERT_TRUE(same_bits(a.acc.data(), b.acc.data(), a.acc.size()));
        }
    }
}

}  // namespace
}  // namespace cactus
