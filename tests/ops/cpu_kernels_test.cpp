// Every optimised CPU kernel table against the scalar references, on random rows of odd sizes,
// and matmul (activation quantization, row split, token tiling) against direct dot products.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

const size_t kBlockCounts[] = {1, 3, 7, 33};

// Element counts to test for a type: several block counts (float types also get ragged tails).
std::vector<size_t> test_lengths(DType type) {
    const size_t block = dtype_traits(type).block_size;
    std::vector<size_t> out;
    for (size_t b : kBlockCounts) out.push_back(b * (block == 1 ? 32 : block));
    if (block == 1) out.insert(out.end(), {1, 7, 15, 17, 100, 257});
    return out;
}

std::vector<float> dequantized(DType type, const std::vector<uint8_t>& row, size_t n) {
    std::vector<float> out(n);
    dequantize_row_ref(type, out.data(), row.data(), n);
    return out;
}

void expect_dot_close(const CpuKernels& k, DType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                      size_t n) {
    const DType dot_type = vec_dot_type(type);
    std::vector<uint8_t> xq = test::quantized_activations(dot_type, x);
    const float ref = vec_dot_ref(type, w.data(), xq.data(), n);
    const float got = k.vec_dot[static_cast<size_t>(type)](w.data(), xq.data(), n);
    const double scale = test::abs_dot(dequantized(type, w, n), dequantized(dot_type, xq, n));
    EXPECT_LE(std::fabs(got - ref), 2e-6 * scale + 1e-30)
        << k.isa_name << " " << dtype_name(type) << " n=" << n << " got " << got << " ref " << ref;
}

TEST(CpuKernels, TablesAreFilledAndGenericComesFirst) {
    std::vector<const CpuKernels*> tables = cpu_kernel_tables();
    ASSERT_FALSE(tables.empty());
    EXPECT_EQ(tables.front(), &cpu_kernels_generic());
    EXPECT_EQ(tables.back(), &cpu_kernels());
    for (const CpuKernels* k : tables) {
        for (DType type : test::weight_types()) {
            EXPECT_NE(k->vec_dot[static_cast<size_t>(type)], nullptr) << k->isa_name << " " << dtype_name(type);
            const DType act = vec_dot_type(type);
            EXPECT_NE(k->quantize_row[static_cast<size_t>(act)], nullptr) << k->isa_name;
        }
    }
    std::printf("kernel tables:");
    for (const CpuKernels* k : tables) std::printf(" %s", k->isa_name);
    std::printf("\n");
}

TEST(CpuKernels, VecDotMatchesReferenceOnRandomBlocks) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(7);
        for (DType type : test::weight_types()) {
            for (size_t n : test_lengths(type)) {
                for (int rep = 0; rep < 3; ++rep) {
                    std::vector<float> x = test::random_floats(n, rng, rep == 2 ? 100.0f : 1.0f);
                    expect_dot_close(*k, type, test::random_raw_row(type, n, rng), x, n);
                    expect_dot_close(*k, type, test::quantized_row(type, n, rng), x, n);
                }
            }
        }
    }
}

TEST(CpuKernels, ActivationQuantizersMatchReferenceBytes) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(11);
        for (DType type : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F16, DType::BF16}) {
            for (size_t blocks : kBlockCounts) {
                const size_t n = blocks * 256;
                std::vector<float> x = test::random_floats(n, rng, 3.0f);
                for (size_t i = 0; i < 64; ++i) x[i] = static_cast<float>(static_cast<int>(i % 9) - 4);
                for (size_t i = 64; i < 96; ++i) x[i] = 0.0f;  // a zero Q8 block
                if (blocks > 1) {                              // Q8_K: +max and -max tie (the first one wins)
                    x[300] = 50.0f;
                    x[301] = -50.0f;
                }
                std::vector<uint8_t> ref = test::quantized_activations(type, x);
                std::vector<uint8_t> got(ref.size(), 0xCD);
                k->quantize_row[static_cast<size_t>(type)](got.data(), x.data(), n);
                EXPECT_EQ(got, ref) << k->isa_name << " " << dtype_name(type) << " n=" << n;
            }
        }
    }
}

// Exact rounding ties: every 32-block has max |x| = 127, so the scale is 1 (or -1 for Q8_K with a
// negative first maximum) and x * (1/d) lands exactly on k + 0.5: Q8_0/Q8_1 round half away from
// zero (roundf), Q8_K half to even (nearest_int). Any other rounding changes the bytes.
TEST(CpuKernels, ActivationQuantizersRoundTiesLikeReference) {
    const size_t n = 512;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(i % 41) - 20) + 0.5f;
    for (size_t b = 0; b < n / 32; ++b) x[b * 32 + (b % 7)] = (b % 2 == 0) ? 127.0f : -127.0f;
    x[256] = -127.0f;  // second Q8_K super-block: first maximum negative
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : {DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
            std::vector<uint8_t> ref = test::quantized_activations(type, x);
            std::vector<uint8_t> got(ref.size(), 0xCD);
            k->quantize_row[static_cast<size_t>(type)](got.data(), x.data(), n);
            EXPECT_EQ(got, ref) << k->isa_name << " " << dtype_name(type);
        }
    }
    // The references themselves: 2.5 -> 3 (away from zero) in Q8_0; 2.5 -> 2 (even) in Q8_K.
    std::vector<float> one(256, 0.0f);
    one[0] = 127.0f;
    one[1] = 2.5f;
    one[2] = -3.5f;
    const std::vector<uint8_t> q80 = test::quantized_activations(DType::Q8_0, one);
    const BlockQ8_0* b80 = reinterpret_cast<const BlockQ8_0*>(q80.data());
    EXPECT_EQ(b80->qs[1], 3);
    EXPECT_EQ(b80->qs[2], -4);
    const std::vector<uint8_t> q8k = test::quantized_activations(DType::Q8_K, one);
    const BlockQ8_K* b8k = reinterpret_cast<const BlockQ8_K*>(q8k.data());
    EXPECT_EQ(std::abs(b8k->qs[1]), 2);
    EXPECT_EQ(std::abs(b8k->qs[2]), 4);
}

// Many plain random rows (the distribution matmul sees): quantizer bytes equal the reference's.
TEST(CpuKernels, ActivationQuantizersMatchReferenceOnManyRows) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(23);
        for (int rep = 0; rep < 300; ++rep) {
            const std::vector<float> x = test::random_floats(512, rng, rep % 2 ? 1.0f : 0.01f);
            for (DType type : {DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
                std::vector<uint8_t> ref = test::quantized_activations(type, x);
                std::vector<uint8_t> got(ref.size(), 0xCD);
                k->quantize_row[static_cast<size_t>(type)](got.data(), x.data(), x.size());
                ASSERT_EQ(got, ref) << k->isa_name << " " << dtype_name(type) << " rep=" << rep;
            }
        }
    }
}

TEST(CpuKernels, DequantizersMatchReference) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(13);
        for (DType type : test::weight_types()) {
            for (size_t n : test_lengths(type)) {
                std::vector<uint8_t> w = test::random_raw_row(type, n, rng);
                std::vector<float> got(n);
                k->dequantize_row[static_cast<size_t>(type)](got.data(), w.data(), n);
                EXPECT_EQ(got, dequantized(type, w, n)) << k->isa_name << " " << dtype_name(type);
            }
        }
    }
}

// matmul_with must give exactly the table's own vec_dot of each weight row with the quantized
// token row, for any thread count, token count and ragged n_out.
TEST(CpuKernels, MatmulEqualsRowDotProducts) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(3)};
    std::mt19937 rng(17);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type :
             {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q6_K, DType::Q4_K, DType::F16, DType::Q4_0}) {
            const size_t n_in = 512;
            const size_t stride = dtype_row_bytes(type, n_in) + 8;  // padded rows
            for (size_t n_tokens : {1, 5, 17}) {
                for (size_t n_out : {1, 37, 70}) {
                    const std::vector<uint8_t> w = test::quantized_rows(type, n_in, n_out, stride, rng);
                    std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                    for (ThreadPool& pool : pools) {
                        std::vector<float> y(n_tokens * n_out, NAN);
                        matmul_with(*k, y.data(), w.data(), type, stride, x.data(), n_tokens, n_in, n_out, pool);
                        for (size_t t = 0; t < n_tokens; ++t) {
                            std::vector<float> xt(x.begin() + t * n_in, x.begin() + (t + 1) * n_in);
                            std::vector<uint8_t> xq = test::quantized_activations(vec_dot_type(type), xt);
                            for (size_t o = 0; o < n_out; ++o) {
                                const float want =
                                    k->vec_dot[static_cast<size_t>(type)](w.data() + o * stride, xq.data(), n_in);
                                ASSERT_EQ(y[t * n_out + o], want)
                                    << k->isa_name << " " << dtype_name(type) << " t=" << t << " o=" << o
                                    << " threads=" << pool.size();
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(CpuKernels, MatmulRejectsBadShapes) {
    ThreadPool pool(1);
    std::vector<uint8_t> w(4096);
    std::vector<float> x(512), y(16);
    EXPECT_THROW(matmul(y.data(), w.data(), DType::Q4_K, 144, x.data(), 1, 100, 1, pool), Error);
    EXPECT_THROW(matmul(y.data(), w.data(), DType::Q4_K, 100, x.data(), 1, 256, 1, pool), Error);
    EXPECT_THROW(matmul(y.data(), w.data(), DType::I32, 1024, x.data(), 1, 256, 1, pool), Error);
    EXPECT_THROW(matmul(y.data(), w.data(), static_cast<DType>(77), 1024, x.data(), 1, 256, 1, pool), Error);
}

}  // namespace
}  // namespace cactus
