// CpuBackend::pack_for_products: with a kernel table that repacks Q4_K, Q6_K (the x86 tables; ctest
// also runs these under CACTUS_CPU_ISA=avx2, tests/CMakeLists.txt) or Q4_0 (the x86 tables), a
// weight of whole panels comes back as Q4_K_X8 / Q6_K_X8 / Q4_0_X8 whose products equal the placed weight's bit for bit; anything
// else comes back as it was; CACTUS_CPU_REPACK=0 turns it off and other values are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_dispatch.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "ops/quant.h"

namespace cactus {
namespace {

std::vector<uint8_t> quantized_rows(DType type, size_t width, size_t rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> row(width);
    const size_t row_bytes = dtype_row_bytes(type, width);
    std::vector<uint8_t> bytes(row_bytes * rows);
    for (size_t r = 0; r < rows; ++r) {
        for (float& v : row) v = dist(rng);
        quantize_row_ref(type, bytes.data() + r * row_bytes, row.data(), width);
    }
    return bytes;
}

// y [n, rows] = x [n, width] W^T on the backend.
std::vector<float> product(CpuBackend& be, const Tensor& w, const std::vector<float>& x, size_t n) {
    HostBuffer xb(x.size() * sizeof(float)), yb(n * w.rows() * sizeof(float));
    const Tensor xt = make_tensor(&xb, 0, DType::F32, w.width(), n);
    const Tensor yt = make_tensor(&yb, 0, DType::F32, w.rows(), n);
    be.upload(xt, x.data(), x.size() * sizeof(float));
    be.matmul(yt, w, xt);
    std::vector<float> y(n * w.rows());
    be.download(y.data(), yt, y.size() * sizeof(float));
    return y;
}

class ScopedRepackEnv {
public:
    explicit ScopedRepackEnv(const char* value) { setenv("CACTUS_CPU_REPACK", value, 1); }
    ~ScopedRepackEnv() { unsetenv("CACTUS_CPU_REPACK"); }
};

TEST(CpuRepack, KWholePanelsRepackedWithTheSameProducts) {
    CpuBackend be(2);
    const CpuKernels& k = *cpu_kernel_set().matmul;
    size_t repacked = 0;
    for (const DType type : {DType::Q4_K, DType::Q6_K, DType::Q4_0}) {
        const bool repacks = k.repack[static_cast<size_t>(type)] != nullptr;
        repacked += repacks;
        const size_t width = 768, rows = 48;
        const std::vector<uint8_t> bytes = quantized_rows(type, width, rows, 5);
        const Tensor placed = be.place_weight(bytes.data(), type, width, rows);
        const Tensor packed = be.pack_for_products(placed);
        EXPECT_EQ(packed.type, repacks ? k.repack_type[static_cast<size_t>(type)] : type) << k.isa_name;
        EXPECT_EQ(packed.type == type, !repacks);
        EXPECT_EQ(packed.buffer != placed.buffer, repacks);
        std::mt19937 rng(9);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (size_t n : {1, 4, 40}) {  // decode, decode steps, prefill panels
            std::vector<float> x(n * width);
            for (float& v : x) v = dist(rng);
            const std::vector<float> want = product(be, placed, x, n), got = product(be, packed, x, n);
            for (size_t i = 0; i < want.size(); ++i) {
                ASSERT_EQ(got[i], want[i]) << dtype_name(type) << " tokens " << n << " i " << i;
            }
        }
    }
    if (repacked == 0) GTEST_SKIP() << "the " << k.isa_name << " table keeps Q4_K, Q6_K and Q4_0 as they are";
}

TEST(CpuRepack, OtherWeightsComeBackAsTheyWere) {
    CpuBackend be(1);
    const std::vector<uint8_t> q4_k = quantized_rows(DType::Q4_K, 512, 40, 6);  // 40 rows: not whole panels of 16
    const Tensor ragged = be.place_weight(q4_k.data(), DType::Q4_K, 512, 40);
    EXPECT_EQ(be.pack_for_products(ragged).buffer, ragged.buffer);
    std::vector<uint8_t> f16(2 * 64 * 32);
    const Tensor half = be.place_weight(f16.data(), DType::F16, 64, 32);
    EXPECT_EQ(be.pack_for_products(half).buffer, half.buffer);
    const Tensor whole = be.place_weight(q4_k.data(), DType::Q4_K, 512, 32);
    {
        ScopedRepackEnv off("0");
        EXPECT_EQ(be.pack_for_products(whole).buffer, whole.buffer);
    }
    {
        ScopedRepackEnv bad("yes");
        if (cpu_kernel_set().matmul->repack[static_cast<size_t>(DType::Q4_K)] != nullptr) {
            EXPECT_THROW(be.pack_for_products(whole), Error);
        }
    }
}

}  // namespace
}  // namespace cactus
