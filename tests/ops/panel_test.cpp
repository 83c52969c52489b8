// Row panels (AVX-512 VNNI table; AVX2 also for the K-quants): a matmul through panels equals the
// table's vec_dot row by row, bit for bit, for an odd block count, a panel count over one thread
// tile, ragged rows and any token count; and vec_dot stays close to the scalar reference, also on
// raw K-quant rows (every bit pattern: 6-bit quants at 63, Q6_K scales at -128) where int16 sums
// could saturate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

const DType kPanelTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool is_k_quant(DType type) { return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K; }

// n_out rows of `type` (n_in elements, `stride` apart): quantized normal data, or raw random bytes.
std::vector<uint8_t> panel_rows(DType type, size_t n_in, size_t n_out, size_t stride, bool raw, std::mt19937& rng) {
    if (!raw) return test::quantized_rows(type, n_in, n_out, stride, rng);
    std::vector<uint8_t> w(stride * n_out, 0xA5);
    for (size_t o = 0; o < n_out; ++o) {
        std::vector<uint8_t> row = test::random_raw_row(type, n_in, rng);
        std::copy(row.begin(), row.end(), w.begin() + o * stride);
    }
    return w;
}

void expect_panels_equal_vec_dot(bool raw, unsigned seed) {
    ThreadPool pool(2);
    std::mt19937 rng(seed);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kPanelTypes) {
            if (k->panel_gemm[static_cast<size_t>(type)] == nullptr || (raw && !is_k_quant(type))) continue;
            // odd block count: 4-block and single-block paths (K-quants: 7 super-blocks)
            const size_t n_in = dtype_traits(type).block_size * 7;
            const size_t n_out = 3 * kPanelRows + 5;
            const size_t stride = dtype_row_bytes(type, n_in) + 6;
            const std::vector<uint8_t> w = panel_rows(type, n_in, n_out, stride, raw, rng);
            for (size_t n_tokens : {2, 3, 9, 19, 35}) {  // AMX: groups of 16 and the rest
                std::vector<float> x = test::random_floats(n_tokens * n_in, rng, raw ? 50.0f : 1.0f);
                std::vector<float> y(n_tokens * n_out, NAN);
                matmul_with(*k, y.data(), w.data(), type, stride, x.data(), n_tokens, n_in, n_out, pool);
                for (size_t t = 0; t < n_tokens; ++t) {
                    std::vector<float> xt(x.begin() + t * n_in, x.begin() + (t + 1) * n_in);
                    std::vector<uint8_t> xq = test::quantized_activations(vec_dot_type(type), xt);
                    for (size_t o = 0; o < n_out; ++o) {
                        const float want =
                            k->vec_dot[static_cast<size_t>(type)](w.data() + o * stride, xq.data(), n_in);
                        const float ref = cpu_kernels_generic().vec_dot[static_cast<size_t>(type)](
                            w.data() + o * stride, xq.data(), n_in);
                        ASSERT_EQ(y[t * n_out + o], want)
                            << k->isa_name << " " << dtype_name(type) << " t=" << t << " o=" << o;
                        if (raw) continue;  // raw rows against the reference: k_tiles_test
                        ASSERT_NEAR(want, ref, 1e-4f * (1.0f + std::fabs(ref)))
                            << k->isa_name << " " << dtype_name(type);
                    }
                }
            }
        }
    }
}

TEST(CpuPanels, MatmulThroughPanelsEqualsVecDot) {
    expect_panels_equal_vec_dot(false, 29);
    const std::string isa = cpu_kernels().isa_name;
    if (isa == "avx512_vnni" || isa == "avx512_amx") {
        EXPECT_NE(cpu_kernels().panel_gemm[static_cast<size_t>(DType::Q4_0)], nullptr);
    }
    if (isa == "avx2" || isa == "avx512_vnni" || isa == "avx512_amx") {  // the AVX2 K panels
        EXPECT_NE(cpu_kernels().panel_gemm[static_cast<size_t>(DType::Q6_K)], nullptr);
    }
}

TEST(CpuPanels, RawKQuantRowsEqualVecDot) { expect_panels_equal_vec_dot(true, 31); }

// The quant bytes of a K-quant super-block (everything but d, dmin and the scales).
std::vector<std::pair<size_t, size_t>> k_quant_fields(DType type) {
    switch (type) {
        case DType::Q4_K:
            return {{offsetof(BlockQ4_K, qs), sizeof(BlockQ4_K::qs)}};
        case DType::Q5_K:
            return {{offsetof(BlockQ5_K, qh), sizeof(BlockQ5_K::qh)}, {offsetof(BlockQ5_K, qs), sizeof(BlockQ5_K::qs)}};
        default:
            return {{offsetof(BlockQ6_K, ql), sizeof(BlockQ6_K::ql)}, {offsetof(BlockQ6_K, qh), sizeof(BlockQ6_K::qh)}};
    }
}

// The int16 sums of the K panels at their bounds: every quant at its largest (0xFF bytes: 15, 31,
// 63) or smallest (0: Q6_K's -32) against activations all +127 or all -127, random scales.
TEST(CpuPanels, KQuantExtremeOperandsEqualVecDot) {
    ThreadPool pool(1);
    std::mt19937 rng(37);
    const size_t n_in = 2 * 256, n_out = kPanelRows;
    std::vector<float> x(2 * n_in, 1.0f);
    std::fill(x.begin() + n_in, x.end(), -1.0f);  // token 0: all 127, token 1: all -127
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
            const size_t ti = static_cast<size_t>(type);
            if (k->panel_gemm[ti] == nullptr) continue;
            for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
                const size_t stride = dtype_row_bytes(type, n_in);
                std::vector<uint8_t> w = panel_rows(type, n_in, n_out, stride, true, rng);
                for (size_t b = 0; b < n_out * n_in / 256; ++b) {
                    for (const auto& field : k_quant_fields(type)) {
                        std::memset(w.data() + b * dtype_traits(type).block_bytes + field.first, fill, field.second);
                    }
                }
                std::vector<float> y(2 * n_out, NAN);
                matmul_with(*k, y.data(), w.data(), type, stride, x.data(), 2, n_in, n_out, pool);
                for (size_t t = 0; t < 2; ++t) {
                    std::vector<float> xt(x.begin() + t * n_in, x.begin() + (t + 1) * n_in);
                    std::vector<uint8_t> xq = test::quantized_activations(DType::Q8_K, xt);
                    for (size_t o = 0; o < n_out; ++o) {
                        const float want = k->vec_dot[ti](w.data() + o * stride, xq.data(), n_in);
                        const float ref = cpu_kernels_generic().vec_dot[ti](w.data() + o * stride, xq.data(), n_in);
                        ASSERT_EQ(y[t * n_out + o], want) << k->isa_name << " " << dtype_name(type) << " t=" << t;
                        ASSERT_NEAR(want, ref, 1e-4f * (1.0f + std::fabs(ref))) << dtype_name(type);
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace cactus
