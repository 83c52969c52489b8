// Prints single-thread vec_dot throughput (GB/s of weights) of every kernel table; informational
// only (timing is never a test condition). The weights (~1-4 MiB) stay in cache, so this measures
// kernel speed, not memory bandwidth.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "backends/cpu/cpu_kernels.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

double weights_gbps(const CpuKernels& k, DType type, const std::vector<uint8_t>& w,
                    const std::vector<uint8_t>& xq, size_t n_in, size_t n_out, float* checksum) {
    const size_t row_bytes = dtype_row_bytes(type, n_in);
    const VecDotFn dot = k.vec_dot[static_cast<size_t>(type)];
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    size_t passes = 0;
    double seconds = 0.0;
    float sum = 0.0f;
    do {
        for (size_t o = 0; o < n_out; ++o) sum += dot(w.data() + o * row_bytes, xq.data(), n_in);
        ++passes;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } while (seconds < 0.03);
    *checksum = sum;
    return static_cast<double>(passes * n_out * row_bytes) / seconds / 1e9;
}

TEST(QuantThroughput, PrintVecDotWeightsGBps) {
    const size_t n_in = 2048, n_out = 256;
    std::mt19937 rng(3);
    std::vector<const CpuKernels*> tables = cpu_kernel_tables();
    std::printf("%-6s", "type");
    for (const CpuKernels* k : tables) std::printf(" %14s", k->isa_name);
    std::printf("   (GB/s of weights, 1 thread, n_in=%zu)\n", n_in);
    for (DType type : test::weight_types()) {
        std::vector<uint8_t> w;
        for (size_t o = 0; o < n_out; ++o) {
            std::vector<uint8_t> row = test::quantized_row(type, n_in, rng);
            w.insert(w.end(), row.begin(), row.end());
        }
        const std::vector<uint8_t> xq =
            test::quantized_activations(vec_dot_type(type), test::random_floats(n_in, rng));
        std::printf("%-6s", dtype_name(type));
        float first = 0.0f;
        for (size_t t = 0; t < tables.size(); ++t) {
            float checksum = 0.0f;
            std::printf(" %14.2f", weights_gbps(*tables[t], type, w, xq, n_in, n_out, &checksum));
            if (t == 0) first = checksum;
            EXPECT_TRUE(std::isfinite(checksum)) << first;
        }
        std::printf("\n");
    }
}

}  // namespace
}  // namespace cactus
