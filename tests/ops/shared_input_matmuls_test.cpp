// matmuls_with: products that read the same activations (q, k and v; gate and up), run as one job of
// the pool, give each product exactly what matmul_with gives it alone, for every table, mixes of
// weight types (activations of one or several types: Q8_0, Q8_1, Q8_K, F32), the repacked layouts,
// ragged and empty row counts, decode (1-2 tokens) and prefill token counts, at 1 and 3 threads;
// decode groups large enough for a tail of pieces equal one thread's result at 2 and 3 threads.
// Bad groups are errors that leave the pool usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

// One product of a group under test: its weights as stored (repacked when the table repacks).
struct TestProduct {
    DType type;
    size_t n_out;
    size_t stride = 0;
    std::vector<uint8_t> w = {};
};

// Random weights of p.type, repacked into the table's layout when it has one and the rows are
// whole panels (as CpuBackend::pack_for_products does at load).
void fill_weights(const CpuKernels& k, TestProduct& p, size_t n_in, std::mt19937& rng) {
    p.stride = dtype_row_bytes(p.type, n_in) + (dtype_traits(p.type).block_size == 1 ? 0 : 4);
    p.w = test::quantized_rows(p.type, n_in, p.n_out, p.stride, rng);
    const size_t slot = static_cast<size_t>(p.type);
    if (k.repack[slot] == nullptr || p.n_out % kPanelRows != 0 || p.n_out == 0) return;
    const DType packed_type = k.repack_type[slot];
    std::vector<uint8_t> packed(dtype_row_bytes(packed_type, n_in) * p.n_out);
    k.repack[slot](packed.data(), p.w.data(), p.stride, p.n_out, n_in);
    p.type = packed_type;
    p.stride = dtype_row_bytes(packed_type, n_in);
    p.w = std::move(packed);
}

std::vector<std::vector<TestProduct>> groups() {
    return {
        {{DType::Q4_K, 48}, {DType::Q4_K, 16}, {DType::Q6_K, 16}},  // q, k, v of a Q4_K_M file
        {{DType::Q4_K, 37}, {DType::Q6_K, 70}},                     // ragged
        {{DType::Q4_0, 48}, {DType::Q4_1, 33}, {DType::Q5_0, 16}, {DType::Q8_0, 70}},
        {{DType::Q8_0, 1}, {DType::F16, 37}, {DType::F32, 5}},
        {{DType::Q5_K, 32}, {DType::Q4_K, 0}, {DType::Q8_0, 32}},  // an empty product
        {{DType::Q4_0, 64}},
    };
}

// The group's outputs from one matmuls_with call ([n_tokens, n_out] each, NaN where nothing wrote).
std::vector<std::vector<float>> run_group(const CpuKernels& k, const std::vector<TestProduct>& group,
                                          const std::vector<float>& x, size_t n_tokens, size_t n_in, ThreadPool& pool) {
    std::vector<std::vector<float>> y(group.size());
    std::vector<MatmulProduct> products;
    for (size_t i = 0; i < group.size(); ++i) {
        y[i].assign(n_tokens * group[i].n_out, NAN);
        products.push_back({y[i].data(), group[i].w.data(), group[i].type, group[i].stride, group[i].n_out});
    }
    matmuls_with(k, products.data(), products.size(), x.data(), n_tokens, n_in, pool);
    return y;
}

TEST(SharedInputMatmuls, EachProductEqualsItsMatmulAlone) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(3)};
    std::mt19937 rng(29);
    const size_t n_in = 512;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (std::vector<TestProduct> group : groups()) {
            for (TestProduct& p : group) fill_weights(*k, p, n_in, rng);
            for (size_t n_tokens : {1, 2, 3, 17}) {
                const std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                for (ThreadPool& pool : pools) {
                    const std::vector<std::vector<float>> got = run_group(*k, group, x, n_tokens, n_in, pool);
                    for (size_t i = 0; i < group.size(); ++i) {
                        const TestProduct& p = group[i];
                        std::vector<float> want(n_tokens * p.n_out, NAN);
                        matmul_with(*k, want.data(), p.w.data(), p.type, p.stride, x.data(), n_tokens, n_in, p.n_out,
                                    pool);
                        for (size_t j = 0; j < want.size(); ++j) {
                            ASSERT_EQ(got[i][j], want[j])
                                << k->isa_name << " product " << i << " (" << dtype_name(p.type) << ", " << p.n_out
                                << " rows) tokens=" << n_tokens << " threads=" << pool.size() << " j=" << j;
                        }
                    }
                }
            }
        }
    }
}

// Decode groups of a few MB get a tail of small pieces after one range per thread (cpu_matmul.cpp,
// decode_chunks): at 2 and 3 threads every row is computed exactly as by one thread, which takes the
// whole group as one range. A row no chunk covers stays NaN.
TEST(SharedInputMatmuls, DecodeTailPiecesCoverEveryRowOnce) {
    ThreadPool one(1), pools[] = {ThreadPool(2), ThreadPool(3)};
    std::mt19937 rng(41);
    const size_t n_in = 1024;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        // about 1.7 MB of weights: gate/up-like Q4_K, a Q6_K v, a ragged Q4_0
        std::vector<TestProduct> group = {{DType::Q4_K, 2048}, {DType::Q6_K, 256}, {DType::Q4_0, 333}};
        for (TestProduct& p : group) fill_weights(*k, p, n_in, rng);
        for (size_t n_tokens : {1, 2}) {
            const std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
            const std::vector<std::vector<float>> want = run_group(*k, group, x, n_tokens, n_in, one);
            for (ThreadPool& pool : pools) {
                const std::vector<std::vector<float>> got = run_group(*k, group, x, n_tokens, n_in, pool);
                for (size_t i = 0; i < group.size(); ++i) {
                    for (size_t j = 0; j < want[i].size(); ++j) {
                        ASSERT_FALSE(std::isnan(want[i][j])) << k->isa_name << " product " << i << " j=" << j;
                        ASSERT_EQ(got[i][j], want[i][j]) << k->isa_name << " product " << i << " tokens=" << n_tokens
                                                         << " threads=" << pool.size() << " j=" << j;
                    }
                }
            }
        }
    }
}

TEST(SharedInputMatmuls, BadGroupsAreErrorsAndThePoolStaysUsable) {
    ThreadPool pool(2);
    std::mt19937 rng(3);
    const size_t n_in = 256;
    const std::vector<uint8_t> w = test::quantized_rows(DType::Q8_0, n_in, 16, dtype_row_bytes(DType::Q8_0, n_in), rng);
    const std::vector<float> x = test::random_floats(n_in, rng);
    std::vector<float> y(16 * (kMaxSharedProducts + 1));
    std::vector<MatmulProduct> products;
    for (size_t i = 0; i <= kMaxSharedProducts; ++i) {
        products.push_back({y.data() + 16 * i, w.data(), DType::Q8_0, dtype_row_bytes(DType::Q8_0, n_in), 16});
    }
    EXPECT_THROW(matmuls(products.data(), products.size(), x.data(), 1, n_in, pool), Error);  // too many
    products[1].w_row_bytes = 10;                                                             // below a row's bytes
    EXPECT_THROW(matmuls(products.data(), 2, x.data(), 1, n_in, pool), Error);
    // Every product is checked before any is computed: a repacked layout of 24 rows (not whole
    // panels of 16) leaves the first product's y untouched.
    std::fill(y.begin(), y.end(), NAN);
    products[1] = {y.data() + 16, w.data(), DType::Q4_0_X8, dtype_row_bytes(DType::Q4_0_X8, n_in), 24};
    EXPECT_THROW(matmuls(products.data(), 2, x.data(), 1, n_in, pool), Error);
    for (size_t o = 0; o < 16; ++o) EXPECT_TRUE(std::isnan(y[o])) << o;
    products[1] = products[0];
    products[1].y = y.data() + 16;
    matmuls(products.data(), 2, x.data(), 1, n_in, pool);
    for (size_t o = 0; o < 16; ++o) EXPECT_EQ(y[o], y[16 + o]);
}

}  // namespace
}  // namespace cactus
