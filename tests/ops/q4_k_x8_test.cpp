// Q4_K_X8 (ops/q4_k_x8.h): the repack keeps every byte (each row's GGUF blocks come back exactly,
// for random bytes: every scale bit pattern), and in every table that repacks Q4_K the products of
// the repacked matrix equal Q4_K's bit for bit: the one-token decode, decode steps of a few
// sequences and the prefill panels, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/q4_k_x8.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

// n_rows random raw Q4_K rows of n elements, `stride` bytes apart (padding 0xA5).
std::vector<uint8_t> raw_q4_k_rows(size_t n, size_t n_rows, size_t stride, std::mt19937& rng) {
    std::vector<uint8_t> w(stride * n_rows, 0xA5);
    for (size_t r = 0; r < n_rows; ++r) {
        const std::vector<uint8_t> row = test::random_raw_row(DType::Q4_K, n, rng);
        std::memcpy(w.data() + r * stride, row.data(), row.size());
    }
    return w;
}

TEST(Q4KX8, RepackKeepsEveryByteOfEveryRow) {
    std::mt19937 rng(71);
    for (size_t n_sb : {1, 2, 7}) {
        const size_t n = 256 * n_sb, n_rows = 24, stride = dtype_row_bytes(DType::Q4_K, n) + 16;
        const std::vector<uint8_t> w = raw_q4_k_rows(n, n_rows, stride, rng);
        const size_t x8_row_bytes = dtype_row_bytes(DType::Q4_K_X8, n);
        ASSERT_EQ(8 * x8_row_bytes, n_sb * kQ4KX8GroupBytes);
        std::vector<uint8_t> packed(x8_row_bytes * n_rows);
        repack_q4_k_x8(packed.data(), w.data(), stride, n_rows, n);
        std::vector<BlockQ4_K> blocks(n_sb);
        for (size_t r = 0; r < n_rows; ++r) {
            q4_k_x8_row_blocks(blocks.data(), packed.data() + (r / 8) * 8 * x8_row_bytes, r % 8, n);
            ASSERT_EQ(std::memcmp(blocks.data(), w.data() + r * stride, n_sb * sizeof(BlockQ4_K)), 0)
                << "row " << r << " of " << n_sb << " super-blocks";
        }
    }
    std::vector<uint8_t> w(144 * 12), packed(148 * 12);
    EXPECT_THROW(repack_q4_k_x8(packed.data(), w.data(), 144, 12, 256), Error);  // not whole groups
}

TEST(Q4KX8, ProductsEqualQ4KBitForBit) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
    std::mt19937 rng(73);
    size_t tables = 0;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        const size_t q4_k = static_cast<size_t>(DType::Q4_K);
        if (k->repack[q4_k] == nullptr) continue;
        ++tables;
        ASSERT_EQ(k->repack_type[q4_k], DType::Q4_K_X8);
        for (size_t n_sb : {1, 3, 13}) {
            const size_t n_in = 256 * n_sb, n_out = 3 * kPanelRows;
            const size_t stride = dtype_row_bytes(DType::Q4_K, n_in), x8_stride = dtype_row_bytes(DType::Q4_K_X8, n_in);
            for (bool raw : {false, true}) {  // quantized from normal data / random bytes
                const std::vector<uint8_t> w = raw ? raw_q4_k_rows(n_in, n_out, stride, rng)
                                                   : test::quantized_rows(DType::Q4_K, n_in, n_out, stride, rng);
                std::vector<uint8_t> packed(x8_stride * n_out);
                k->repack[q4_k](packed.data(), w.data(), stride, n_out, n_in);
                for (size_t n_tokens : {1, 2, 3, 9, 17}) {  // decode, decode steps, panels
                    const std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                    for (ThreadPool& pool : pools) {
                        std::vector<float> want(n_tokens * n_out, NAN), got(n_tokens * n_out, NAN);
                        matmul_with(*k, want.data(), w.data(), DType::Q4_K, stride, x.data(), n_tokens, n_in, n_out,
                                    pool);
                        matmul_with(*k, got.data(), packed.data(), DType::Q4_K_X8, x8_stride, x.data(), n_tokens, n_in,
                                    n_out, pool);
                        for (size_t i = 0; i < want.size(); ++i) {
                            ASSERT_EQ(got[i], want[i]) << k->isa_name << " n_in=" << n_in << " tokens=" << n_tokens
                                                       << " raw=" << raw << " i=" << i;
                        }
                    }
                }
            }
        }
        // A matrix of Q4_K_X8 is whole panels: other row counts are an error, not a wrong answer.
        std::vector<uint8_t> packed(dtype_row_bytes(DType::Q4_K_X8, 256) * 24);
        std::vector<float> x(256), y(24);
        EXPECT_THROW(matmul_with(*k, y.data(), packed.data(), DType::Q4_K_X8, dtype_row_bytes(DType::Q4_K_X8, 256),
                                 x.data(), 1, 256, 24, pools[0]),
                     Error);
    }
    if (tables == 0) GTEST_SKIP() << "no kernel table on this CPU repacks Q4_K (the AVX2 table does)";
}

}  // namespace
}  // namespace cactus
