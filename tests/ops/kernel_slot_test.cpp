// Unknown tensor type ids are errors wherever a kernel is looked up, never another type's kernel:
// a lookup by `id & 31` would alias ids 31..63 to types 0..31 (kernel_slot checks the id instead).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace cactus {
namespace {

TEST(KernelSlot, UnknownTypeIdsAreErrorsNeverAliases) {
    ThreadPool pool(1);
    std::vector<uint8_t> src(4096, 0);
    std::vector<float> dst(256), x(256), y(4);
    int unknown = 0;
    for (uint32_t id = 0; id < 300; ++id) {
        const DType type = static_cast<DType>(id);
        if (dtype_traits(id) != nullptr || dtype_is_internal(type)) {
            EXPECT_EQ(kernel_slot(type, "test"), id);
            continue;
        }
        ++unknown;
        EXPECT_THROW(kernel_slot(type, "test"), Error) << "id " << id;
        try {
            dequantize_row_cpu(type, dst.data(), src.data(), 32);
            ADD_FAILURE() << "id " << id << " dequantized as another type";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("unknown tensor type id " + std::to_string(id)), std::string::npos)
                << e.what();
        }
        EXPECT_THROW(matmul(y.data(), src.data(), type, 64, x.data(), 1, 32, 1, pool), Error) << "id " << id;
    }
    EXPECT_GT(unknown, 250);
    // An internal layout (rows interleaved in groups) has no row kernels: a clear error, not a row.
    try {
        dequantize_row_cpu(DType::Q4_K_X8, dst.data(), src.data(), 256);
        ADD_FAILURE() << "Q4_K_X8 dequantized by row";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unsupported type Q4_K_X8"), std::string::npos) << e.what();
    }
    // Known types still dequantize: an F16 row of zeros.
    dequantize_row_cpu(DType::F16, dst.data(), src.data(), 32);
    EXPECT_EQ(dst[0], 0.0f);
}

}  // namespace
}  // namespace cactus
