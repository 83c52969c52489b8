// Prints single-thread vec_dot throughput (GB/s of weights) of every kernel table; informational
// only (timing is never a test condition). The weights (~1-4 MiB) stay in cache, so this measures
// kernel speed, not memory bandwidth.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cstdio>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

double weights_gbps(const CpuKernels& k, DType type, const std::vector<uint8_t>& w, const std::vector<uint8_t>& xq,
                    size_t n_in, size_t n_out, float* checksum) {
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
        const std::vector<uint8_t> xq = test::quantized_activations(vec_dot_type(type), test::random_floats(n_in, rng));
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

// CPU seconds of the calling thread: a 1-thread pool runs matmul on the caller, so a pass is timed
// without the time other processes of a shared machine take from it.
double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds per matmul_with call (best of a few timed passes; thread CPU time with a 1-thread pool).
double matmul_seconds(const CpuKernels& k, DType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                      std::vector<float>& y, size_t n_tokens, size_t n_in, size_t n_out, ThreadPool& pool) {
    using Clock = std::chrono::steady_clock;
    const size_t row_bytes = dtype_row_bytes(type, n_in);
    double best = 1e30;
    const auto start = Clock::now();
    do {
        const auto t0 = Clock::now();
        const double cpu0 = thread_cpu_seconds();
        matmul_with(k, y.data(), w.data(), type, row_bytes, x.data(), n_tokens, n_in, n_out, pool);
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::min(best, pool.size() == 1 ? thread_cpu_seconds() - cpu0 : wall);
    } while (std::chrono::duration<double>(Clock::now() - start).count() < 0.05);
    return best;
}

// Prints single-thread matmul speed: GB/s of weights for one token (matrix-vector, the decode
// case) and GOPS (2 * n_in * n_out * tokens / s) for 64 tokens (the prefill case).
TEST(QuantThroughput, PrintMatmulSpeed) {
    const size_t n_in = 1536, n_out = 1024, n_tokens = 64;
    ThreadPool pool(1);
    std::mt19937 rng(5);
    std::vector<const CpuKernels*> tables = cpu_kernel_tables();
    std::printf("%-6s", "type");
    for (const CpuKernels* k : tables) std::printf(" %9s GB/s %9s GOPS", k->isa_name, "");
    std::printf("   (1 thread, %zu x %zu; 1 token / %zu tokens)\n", n_out, n_in, n_tokens);
    for (DType type :
         {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0}) {
        std::vector<uint8_t> w;
        for (size_t o = 0; o < n_out; ++o) {
            std::vector<uint8_t> row = test::quantized_row(type, n_in, rng);
            w.insert(w.end(), row.begin(), row.end());
        }
        const std::vector<float> x = test::random_floats(n_in * n_tokens, rng);
        std::vector<float> y(n_out * n_tokens);
        std::printf("%-6s", dtype_name(type));
        for (const CpuKernels* k : tables) {
            const double one = matmul_seconds(*k, type, w, x, y, 1, n_in, n_out, pool);
            const double many = matmul_seconds(*k, type, w, x, y, n_tokens, n_in, n_out, pool);
            std::printf(" %14.2f %14.1f", static_cast<double>(w.size()) / one / 1e9,
                        2.0 * static_cast<double>(n_in * n_out * n_tokens) / many / 1e9);
            EXPECT_TRUE(std::isfinite(y[0]));
        }
        std::printf("\n");
    }
}

// Prints single-thread matrix-vector speed on weights far larger than the caches (GB/s from RAM).
TEST(QuantThroughput, PrintMatvecFromMemory) {
    ThreadPool pool(1);
    std::mt19937 rng(9);
    for (DType type : {DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        // 26-60 MB of weights: far beyond the last-level cache
        const size_t n_in = dtype_traits(type).block_size == 32 ? 640 : 1536, n_out = 65536;
        const size_t row_bytes = dtype_row_bytes(type, n_in);
        std::vector<uint8_t> row = test::quantized_row(type, n_in, rng);
        std::vector<uint8_t> w(row_bytes * n_out);
        for (size_t o = 0; o < n_out; ++o) std::copy(row.begin(), row.end(), w.begin() + o * row_bytes);
        const std::vector<float> x = test::random_floats(n_in, rng);
        std::vector<float> y(n_out);
        std::printf("%-6s", dtype_name(type));
        for (const CpuKernels* k : cpu_kernel_tables()) {
            const double s = matmul_seconds(*k, type, w, x, y, 1, n_in, n_out, pool);
            std::printf(" %s %.2f GB/s", k->isa_name, static_cast<double>(w.size()) / s / 1e9);
        }
        std::printf("   (1 thread, %zu x %zu, one token)\n", n_out, n_in);
    }
}

}  // namespace
}  // namespace cactus
