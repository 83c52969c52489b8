// Row panels (AVX-512 VNNI table): a matmul through panels equals the table's vec_dot row by row,
// bit for bit, for an odd block count, a panel count over one thread tile, ragged rows and any
// token count; and vec_dot stays close to the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

TEST(CpuPanels, MatmulThroughPanelsEqualsVecDot) {
    ThreadPool pool(2);
    std::mt19937 rng(29);
    size_t tables_with_panels = 0;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0}) {
            if (k->panel_gemm[static_cast<size_t>(type)] == nullptr) continue;
            ++tables_with_panels;
            const size_t n_in = 32 * 7;  // odd block count: 4-block and single-block paths
            const size_t n_out = 3 * kPanelRows + 5;
            const size_t stride = dtype_row_bytes(type, n_in) + 6;
            const std::vector<uint8_t> w = test::quantized_rows(type, n_in, n_out, stride, rng);
            for (size_t n_tokens : {2, 9, 19}) {
                std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
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
                        ASSERT_NEAR(want, ref, 1e-4f * (1.0f + std::fabs(ref)))
                            << k->isa_name << " " << dtype_name(type);
                    }
                }
            }
        }
    }
    if (cpu_kernels().isa_name == std::string("avx512_vnni")) {
        EXPECT_GT(tables_with_panels, 0u);
    }
}

}  // namespace
}  // namespace cactus
