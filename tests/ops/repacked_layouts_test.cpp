// The load-time layouts Q4_K_X8, Q6_K_X8, Q4_0_X8 (ops/q4_k_x8.h, q6_k_x8.h, q4_0_x8.h): the repack keeps
// every byte (each row's GGUF blocks come back exactly, for random bytes: every bit pattern of
// scales and quants), and in every table that repacks the file type the products of the repacked
// matrix equal the file type's bit for bit: the one-token decode, decode steps of a few sequences
// and the prefill panels, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/q4_0_x8.h"
#include "ops/q4_k_x8.h"
#include "ops/q6_k_x8.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

// A layout under test: the file type, the internal one, bytes per group and block, the file's
// block, the repack and its inverse for one row.
template <DType kFileType, DType kPackedType, size_t kGroup, class BlockType,
          void (*kRepack)(uint8_t*, const uint8_t*, size_t, size_t, size_t),
          void (*kRowBlocks)(BlockType*, const uint8_t*, size_t, size_t)>
struct Layout {
    static constexpr DType kFile = kFileType, kPacked = kPackedType;
    static constexpr size_t kGroupBytes = kGroup;
    using Block = BlockType;
    static void repack(uint8_t* dst, const uint8_t* src, size_t stride, size_t n_rows, size_t n) {
        kRepack(dst, src, stride, n_rows, n);
    }
    static void row_blocks(Block* dst, const uint8_t* group, size_t row, size_t n) { kRowBlocks(dst, group, row, n); }
};

using Q4KX8 = Layout<DType::Q4_K, DType::Q4_K_X8, kQ4KX8GroupBytes, BlockQ4_K, repack_q4_k_x8, q4_k_x8_row_blocks>;
using Q6KX8 = Layout<DType::Q6_K, DType::Q6_K_X8, kQ6KX8GroupBytes, BlockQ6_K, repack_q6_k_x8, q6_k_x8_row_blocks>;
using Q40X8 = Layout<DType::Q4_0, DType::Q4_0_X8, kQ4_0X8GroupBytes, BlockQ4_0, repack_q4_0_x8, q4_0_x8_row_blocks>;

template <class L>
class RepackedLayout : public ::testing::Test {};
using Layouts = ::testing::Types<Q4KX8, Q6KX8, Q40X8>;
TYPED_TEST_SUITE(RepackedLayout, Layouts);

// n_rows random raw rows of `type` of n elements, `stride` bytes apart (padding 0xA5).
std::vector<uint8_t> raw_rows(DType type, size_t n, size_t n_rows, size_t stride, std::mt19937& rng) {
    std::vector<uint8_t> w(stride * n_rows, 0xA5);
    for (size_t r = 0; r < n_rows; ++r) {
        const std::vector<uint8_t> row = test::random_raw_row(type, n, rng);
        std::memcpy(w.data() + r * stride, row.data(), row.size());
    }
    return w;
}

TYPED_TEST(RepackedLayout, RepackKeepsEveryByteOfEveryRow) {
    using L = TypeParam;
    std::mt19937 rng(71);
    for (size_t n_sb : {1, 2, 7}) {
        const size_t n = 256 * n_sb, n_rows = 24, stride = dtype_row_bytes(L::kFile, n) + 16;
        const std::vector<uint8_t> w = raw_rows(L::kFile, n, n_rows, stride, rng);
        const size_t x8_row_bytes = dtype_row_bytes(L::kPacked, n);
        const size_t n_blocks = n / dtype_traits(L::kPacked).block_size;
        ASSERT_EQ(8 * x8_row_bytes, n_blocks * L::kGroupBytes);
        std::vector<uint8_t> packed(x8_row_bytes * n_rows);
        L::repack(packed.data(), w.data(), stride, n_rows, n);
        std::vector<typename L::Block> blocks(n_blocks);
        for (size_t r = 0; r < n_rows; ++r) {
            L::row_blocks(blocks.data(), packed.data() + (r / 8) * 8 * x8_row_bytes, r % 8, n);
            ASSERT_EQ(std::memcmp(blocks.data(), w.data() + r * stride, n_blocks * sizeof(typename L::Block)), 0)
                << "row " << r << " of " << n << " elements";
        }
    }
    const size_t row_bytes = dtype_row_bytes(L::kFile, 256), x8_row_bytes = dtype_row_bytes(L::kPacked, 256);
    std::vector<uint8_t> w(row_bytes * 12), packed(x8_row_bytes * 12);
    EXPECT_THROW(L::repack(packed.data(), w.data(), row_bytes, 12, 256), Error);  // not whole groups
}

TYPED_TEST(RepackedLayout, ProductsEqualTheFileTypeBitForBit) {
    using L = TypeParam;
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
    std::mt19937 rng(73);
    size_t tables = 0;
    const size_t slot = static_cast<size_t>(L::kFile);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        if (k->repack[slot] == nullptr) continue;
        ++tables;
        ASSERT_EQ(k->repack_type[slot], L::kPacked);
        for (size_t n_sb : {1, 3, 13}) {
            const size_t n_in = 256 * n_sb, n_out = 3 * kPanelRows;
            const size_t stride = dtype_row_bytes(L::kFile, n_in), x8_stride = dtype_row_bytes(L::kPacked, n_in);
            for (bool raw : {false, true}) {  // quantized from normal data / random bytes
                const std::vector<uint8_t> w = raw ? raw_rows(L::kFile, n_in, n_out, stride, rng)
                                                   : test::quantized_rows(L::kFile, n_in, n_out, stride, rng);
                std::vector<uint8_t> packed(x8_stride * n_out);
                k->repack[slot](packed.data(), w.data(), stride, n_out, n_in);
                for (size_t n_tokens : {1, 2, 3, 9, 17}) {  // decode, decode steps, panels
                    const std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                    for (ThreadPool& pool : pools) {
                        std::vector<float> want(n_tokens * n_out, NAN), got(n_tokens * n_out, NAN);
                        matmul_with(*k, want.data(), w.data(), L::kFile, stride, x.data(), n_tokens, n_in, n_out, pool);
                        matmul_with(*k, got.data(), packed.data(), L::kPacked, x8_stride, x.data(), n_tokens, n_in,
                                    n_out, pool);
                        for (size_t i = 0; i < want.size(); ++i) {
                            ASSERT_EQ(got[i], want[i]) << k->isa_name << " n_in=" << n_in << " tokens=" << n_tokens
                                                       << " raw=" << raw << " i=" << i;
                        }
                    }
                }
            }
        }
        // A repacked matrix is whole panels: other row counts are an error, not a wrong answer.
        const size_t x8_stride = dtype_row_bytes(L::kPacked, 256);
        std::vector<uint8_t> packed(x8_stride * 24);
        std::vector<float> x(256), y(24);
        EXPECT_THROW(matmul_with(*k, y.data(), packed.data(), L::kPacked, x8_stride, x.data(), 1, 256, 24, pools[0]),
                     Error);
    }
    if (tables == 0)
        GTEST_SKIP() << "no kernel table on this CPU repacks " << dtype_name(L::kFile) << " (the x86 tables repack)";
}

}  // namespace
}  // namespace cactus
